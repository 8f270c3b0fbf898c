#pragma once
// The Llama family of decoders (Llama 2/3, Qwen2, Mistral without sliding windows, SmolLM,
// TinyLlama): RMSNorm, rotary positions in Hugging Face's convention, grouped-query attention, a
// SwiGLU MLP, no biases but Qwen2's on q, k and v, a tied or untied output head. A block is one
// ZeRO-3 unit; with activation checkpointing a block keeps only its input.
#include <cstdint>
#include <memory>

#include "zt/nn/module.h"

namespace zt::nn {

struct LlamaConfig {
  int64_t vocab_size = 32000;
  int64_t block_size = 2048;  // longest sequence (max_position_embeddings)
  int64_t n_layer = 2, n_head = 4, n_kv_head = 4, n_embd = 256;
  int64_t intermediate_size = 688;
  float rope_theta = 10000.f;
  float rms_norm_eps = 1e-6f;
  bool tie_word_embeddings = false;
  bool qkv_bias = false;  // Qwen2
  float init_std = 0.02f;  // initializer_range: every Linear and the embedding
  bool activation_checkpointing = false;
  int64_t checkpoint_blocks = -1;  // how many blocks (from the first) checkpoint; -1 = all
  uint64_t seed = 42;
  // Throws a config error naming the key and the nearest valid value.
  void validate() const;
};

// inputs {ids [B, T] i32} -> logits [B, T, vocab]. Parameters, with Hugging Face's names where the
// tensor is theirs and Phi-3's where q/k/v and gate/up are fused (one product each):
// model.embed_tokens, model.layers.N.{input_layernorm, self_attn.qkv_proj (rows: q of n_head
// heads, k then v of n_kv_head heads), self_attn.o_proj, post_attention_layernorm,
// mlp.gate_up_proj (rows: gate, then up), mlp.down_proj}, model.norm, lm_head (absent when tied).
std::shared_ptr<Module> make_llama(const LlamaConfig& c);

}  // namespace zt::nn
