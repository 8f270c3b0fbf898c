#pragma once
// What several model entries (Note [model registry]) share: the keys of the MLPs and of the
// transformers, the image classifiers' entry, the example micro-batches of each task (Note
// [measured activations] in dry_run.h) and the sizes their data gives.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model_kind.h"
#include "zt/config/config.h"
#include "zt/nn/transformer.h"

namespace zt::apps {

// mlp and resmlp: fully connected layers of `hidden` on flattened images of input_dim features.
struct MlpKeys : config::ModelKeys {
  std::vector<int64_t> hidden = {256, 256};
  std::string activation = "relu";  // relu | gelu
  int64_t input_dim = 784, num_classes = 10;
  int64_t hidden_size() const override { return hidden.empty() ? 0 : *std::max_element(hidden.begin(), hidden.end()); }
};
config::ModelFamily mlp_family(config::ModelCheck check);
// Weights and biases of that MLP; nullopt when the count overflows int64.
std::optional<int64_t> mlp_parameter_count(const MlpKeys& m);
// A config error unless `params` and its fp32 bytes fit in int64; `keys` names what gave them.
void check_parameter_count(std::optional<int64_t> params, const std::string& source, const std::string& keys);

// cnn: per entry of channels a 3x3 convolution + ReLU + 2x2 max pooling, then fully connected
// layers of fc, then num_classes (nn::make_cnn). Images are in_channels x image_size^2.
struct CnnKeys : config::ModelKeys {
  std::vector<int64_t> channels = {64, 128, 256};
  std::vector<int64_t> fc = {1024};
  int64_t image_size = 32, in_channels = 1, num_classes = 10;
  int64_t hidden_size() const override {
    int64_t h = 0;
    for (const auto* v : {&channels, &fc})
      for (int64_t x : *v) h = std::max(h, x);
    return h;
  }
};
std::optional<int64_t> cnn_parameter_count(const CnnKeys& m);  // nullopt past int64

// gpt, bert and llama: Hugging Face's names (vocab_size, n_positions as block_size, ...).
struct TransformerKeys : config::ModelKeys {
  int64_t vocab_size = 50257, block_size = 256, n_layer = 6, n_head = 6, n_embd = 384;
  double dropout = 0.0;
  int64_t hidden_size() const override { return n_embd; }
  virtual int64_t kv_heads() const { return n_head; }  // grouped-query attention's key/value heads
};
// A function, not a global: the entries copy it during static initialisation.
std::vector<std::string> transformer_keys();
// Reads transformer_keys() into `k`; n_embd must be a multiple of n_head.
void read_transformer_keys(const config::Section& s, TransformerKeys& k);
// The module's config from those keys and the activation_checkpointing section.
nn::TransformerConfig transformer_config(const TransformerKeys& k, const config::Config& c);
ModelShape transformer_shape(const config::Config& c);  // vocab_size, block_size
// QK^T and AV of a token, forward and backward: 12 x n_layer x n_embd x the sequence length.
int64_t transformer_attention_flops(const config::Config& c);
// A decoder's heads (model.n_head, its key/value heads, n_embd / n_head), no key mask.
AttentionHeads causal_attention(const config::Config& c);

inline int64_t input_dim_features(const config::Config& c) { return c.model.as<MlpKeys>().input_dim; }
inline ModelShape mlp_shape(const config::Config& c) { return {.num_classes = c.model.as<MlpKeys>().num_classes}; }
// An image classifier's entry: its own build and input; the image task, one row a sample and
// evaluation batches of up to 1000 images.
ModelKind image_model(const char* type, config::ModelFamily family, decltype(ModelKind::build) build,
                      decltype(ModelKind::shape) shape, decltype(ModelKind::input_features) features,
                      const char* input_keys);
// A decoder-only language model's entry (gpt, llama): its own keys, build, task (which tokenizer's
// shards) and Hugging Face names; token rows, attention's FLOPs, and `generate` with GPT-2's tokenizer.
ModelKind language_model(const char* type, config::ModelFamily family, decltype(ModelKind::build) build,
                         decltype(ModelKind::task) task, decltype(ModelKind::hf_mapping) hf_mapping,
                         decltype(ModelKind::hf_config) hf_config);
// Samples per evaluation forward of an image task: 1000, or the test split's limit when smaller.
int64_t image_eval_batch(const config::Config& c, int64_t micro);

// Examples: flattened images and their labels; token ids and their next tokens; ids with an
// attention mask, scored per token (masked LM) or per sequence.
MicroBatch image_example(const config::Config& c, int64_t n);
MicroBatch lm_example(const config::Config& c, int64_t n);
MicroBatch masked_example(const config::Config& c, int64_t n, bool per_token);
// Tokens of a training sequence: data.seq_len, else the model's block.
int64_t sequence_length(const config::Config& c);
inline int64_t eval_batch_is_micro(const config::Config&, int64_t micro) { return micro; }

// A Hugging Face config.json read into a family's keys (Note [HF config]): each field read by
// its name, a config error naming the file and the field for a value the family cannot take.
struct HfFields {
  const nlohmann::json& hf;
  const std::string& file;
  int64_t integer(const char* key) const;  // required, >= 1
  int64_t integer(const char* key, int64_t fallback) const;
  double number(const char* key, double fallback) const;
  bool flag(const char* key, bool fallback) const;
  std::string text(const char* key, const std::string& fallback) const;
  bool has(const char* key) const { return hf.contains(key) && !hf[key].is_null(); }
  [[noreturn]] void refuse(const char* key, const std::string& why) const;
};

}  // namespace zt::apps
