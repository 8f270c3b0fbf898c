#pragma once
// model.type llama's keys of the model section (its entry, llama.cpp, reads and checks them).
#include <cstdint>

#include "shared.h"

namespace zt::apps {

// Hugging Face's LlamaConfig names in parentheses: key/value heads (num_key_value_heads; 0 =
// n_head), the SwiGLU width (0 = 8/3 n_embd rounded up to 64), RMSNorm's eps, the output head
// tied to the embedding, and Qwen2's q/k/v biases. dropout is read and must be 0.
struct LlamaKeys : TransformerKeys {
  int64_t n_kv_head = 0, intermediate_size = 0;
  double rope_theta = 10000.0, rms_norm_eps = 1e-6;
  bool tie_word_embeddings = false, qkv_bias = false;
  int64_t kv_heads() const override { return n_kv_head > 0 ? n_kv_head : n_head; }
};

}  // namespace zt::apps
