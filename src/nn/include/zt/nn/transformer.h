#pragma once
// Transformer layers and models: GPT-2 (Hugging Face parameter names) and a BERT encoder with
// masked-language-model and sequence-classification heads. A transformer block is one ZeRO-3
// unit; with activation checkpointing a block keeps only its input and recomputes in backward.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "zt/core/random.h"
#include "zt/nn/module.h"
#include "zt/ops/gelu.h"

namespace zt::ag {
struct AddNorm;  // zt/autograd/layers.h
}

namespace zt::nn {

// Initialisers drawing from a shared generator in registration order.
Init normal_init(Generator& gen, float stddev);
Init constant_init(float value);

// Dropout seeds: every dropout call takes the next seed of a per-thread stream that the
// training loop restarts per micro-batch (from seed, rank, step, micro-batch), so masks are
// deterministic; a checkpointed block rewinds the stream to recompute the same masks.
void set_dropout_stream(uint64_t base);
uint64_t next_dropout_seed();
uint64_t dropout_stream_position();
void set_dropout_stream_position(uint64_t pos);

// Children named 0, 1, ... that the parent calls one by one (torch.nn.ModuleList).
class ModuleList : public Module {
 public:
  void add(std::shared_ptr<Module> m);
  Module& at(size_t i) { return *items_[i]; }
  size_t size() const { return items_.size(); }
  const char* type_name() const override { return "ModuleList"; }

 protected:
  Tensor forward(const Tensor& x) override;  // an error: a list is not called

 private:
  std::vector<Module*> items_;
};

class Embedding : public Module {
 public:
  Embedding(int64_t num, int64_t dim, Init init);
  const char* type_name() const override { return "Embedding"; }
  Tensor weight;

 protected:
  Tensor forward(const Tensor& ids) override;
};

class LayerNorm : public Module {
 public:
  explicit LayerNorm(int64_t dim, float eps = 1e-5f);
  const char* type_name() const override { return "LayerNorm"; }
  // x + r and its norm in one pass (ag::add_layer_norm), called as the module is.
  ag::AddNorm add_norm(const Tensor& x, const Tensor& r);
  Tensor weight, bias;

 protected:
  Tensor forward(const Tensor& x) override;

 private:
  float eps_;
};

class Dropout : public Module {
 public:
  explicit Dropout(float p);
  const char* type_name() const override { return "Dropout"; }

 protected:
  Tensor forward(const Tensor& x) override;

 private:
  float p_;
};

Tensor position_ids(int64_t T, Device device);  // [T] i32 on `device`: 0, 1, ..., T-1

// Runs a child with activation checkpointing when enabled: forward without a graph, keeping
// only the inputs; backward recomputes the child's forward (same dropout masks) and
// backpropagates through it. Gradients are identical to running the child directly.
Tensor checkpointed(Module& child, const std::vector<Tensor>& inputs);
// True while checkpointed() recomputes a child inside backward (ZeRO-3 then neither prefetches
// the following units nor releases the recomputed one).
bool recomputing();

struct TransformerConfig {
  int64_t vocab_size = 50257;
  int64_t block_size = 1024;  // longest sequence (positions)
  int64_t n_layer = 12, n_head = 12, n_embd = 768;
  int64_t type_vocab_size = 2;  // BERT token types
  ops::Gelu gelu = ops::Gelu::tanh;  // BERT's activation (GPT-2's is the tanh form)
  float dropout = 0.0f;
  float ln_eps = 1e-5f;
  bool activation_checkpointing = false;
  int64_t checkpoint_blocks = -1;  // how many blocks (from the first) checkpoint; -1 = all
  uint64_t seed = 42;
  void validate(const char* model) const;
};

// GPT-2: inputs {ids [B, T] i32} -> logits [B, T, vocab]. Parameters wte, wpe, h.N.ln_1,
// h.N.attn.c_attn, h.N.attn.c_proj, h.N.ln_2, h.N.mlp.c_fc, h.N.mlp.c_proj, ln_f; the output
// projection is wte (tied: one parameter). Linear weights are [out, in] (torch.nn.Linear's
// layout; Hugging Face's Conv1D stores the transpose).
std::shared_ptr<Module> make_gpt(const TransformerConfig& c);

// BERT encoder (post-LN, Hugging Face names under bert.*, with q, k and v fused into
// attention.self.qkv). head "mlm": inputs {ids, attention mask [B, T] i32 (0 = padding),
// token types (optional)} -> logits [B, T, vocab] (decoder tied to the word embeddings).
// head "classify": the same inputs -> [B, num_labels] from the [CLS] position, through
// bert.pooler (dense + tanh, as BertForSequenceClassification) when `pooler`.
std::shared_ptr<Module> make_bert(const TransformerConfig& c, const std::string& head, int64_t num_labels = 2,
                                  bool pooler = false);

}  // namespace zt::nn
