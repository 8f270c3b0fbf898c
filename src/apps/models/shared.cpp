#include "shared.h"

#include <algorithm>

#include "../tasks.h"
#include "zt/core/error.h"

namespace zt::apps {

config::ModelFamily mlp_family(config::ModelCheck check) {
  return {.keys = {"hidden", "activation", "input_dim", "num_classes"},
          .parse =
              [](const config::Section& s) {
                auto m = std::make_shared<MlpKeys>();
                s.read_int_list("hidden", m->hidden, 1);
                s.read_choice("activation", m->activation, {"relu", "gelu"});
                s.read_int("input_dim", m->input_dim, 1);
                s.read_int("num_classes", m->num_classes, 2);
                return std::shared_ptr<const config::ModelKeys>(std::move(m));
              },
          .check = check};
}

std::optional<int64_t> mlp_parameter_count(const MlpKeys& m) {
  int64_t params = 0, prev = m.input_dim, layer = 0;
  for (size_t i = 0; i <= m.hidden.size(); ++i) {
    const int64_t out = i < m.hidden.size() ? m.hidden[i] : m.num_classes;
    if (__builtin_mul_overflow(prev, out, &layer) || __builtin_add_overflow(layer, out, &layer) ||
        __builtin_add_overflow(params, layer, &params))
      return std::nullopt;
    prev = out;
  }
  return params;
}

void check_parameter_count(std::optional<int64_t> params, const std::string& source, const std::string& keys) {
  int64_t bytes = 0;
  ZT_CHECK_AS(ErrorKind::config, params && !__builtin_mul_overflow(*params, int64_t(4), &bytes), "[config] ", source,
              ": ", keys, " give more parameters than 64-bit sizes can count");
}

std::vector<std::string> transformer_keys() {
  return {"vocab_size", "block_size", "n_layer", "n_head", "n_embd", "dropout"};
}

void read_transformer_keys(const config::Section& s, TransformerKeys& k) {
  s.read_int("vocab_size", k.vocab_size, 1, config::kMaxVocabSize);
  s.read_int("block_size", k.block_size, 1, 1 << 20);
  s.read_int("n_layer", k.n_layer, 1, 1 << 10);
  s.read_int("n_head", k.n_head, 1, 1 << 12);
  s.read_int("n_embd", k.n_embd, 1, 1 << 16);
  s.read_number("dropout", k.dropout, 0, false, 1, true);
  ZT_CHECK_AS(ErrorKind::config, k.n_embd % k.n_head == 0, "[config] ", s.source(), ": model.n_embd ", k.n_embd,
              " is not a multiple of model.n_head ", k.n_head, " (nearest valid n_embd: ",
              std::max<int64_t>(k.n_head, (k.n_embd + k.n_head / 2) / k.n_head * k.n_head), ")");
}

nn::TransformerConfig transformer_config(const TransformerKeys& k, const config::Config& c) {
  nn::TransformerConfig t;
  t.vocab_size = k.vocab_size;
  t.block_size = k.block_size;
  t.n_layer = k.n_layer;
  t.n_head = k.n_head;
  t.n_embd = k.n_embd;
  t.dropout = float(k.dropout);
  t.activation_checkpointing = c.activation_checkpointing.enabled;
  t.checkpoint_blocks =
      c.activation_checkpointing.number_checkpoints > 0 ? c.activation_checkpointing.number_checkpoints : -1;
  t.seed = c.seed;
  return t;
}

int64_t transformer_attention_flops(const config::Config& c) {
  const auto& k = c.model.as<TransformerKeys>();
  return 12 * k.n_layer * k.n_embd * sequence_length(c);
}

AttentionHeads causal_attention(const config::Config& c) {
  const auto& k = c.model.as<TransformerKeys>();
  return {k.n_head, k.kv_heads(), k.n_embd / k.n_head, false};
}

ModelShape transformer_shape(const config::Config& c) {
  const auto& k = c.model.as<TransformerKeys>();
  return {.vocab_size = k.vocab_size, .block_size = k.block_size};
}

int64_t image_eval_batch(const config::Config& c, int64_t) {
  return std::min<int64_t>(1000, c.data.test_limit > 0 ? c.data.test_limit : 1000);  // ImageTask::eval_batch
}

ModelKind image_model(const char* type, config::ModelFamily family, decltype(ModelKind::build) build,
                      decltype(ModelKind::shape) shape, decltype(ModelKind::input_features) features,
                      const char* input_keys) {
  return {.type = type,
          .family = std::move(family),
          .shape = shape,
          .build = build,
          .task = make_image_task,
          .example = image_example,
          .rows_per_sample = [](const config::Config&) { return int64_t(1); },
          .eval_batch = image_eval_batch,
          .input_features = features,
          .input_keys = input_keys};
}

ModelKind language_model(const char* type, config::ModelFamily family, decltype(ModelKind::build) build,
                         decltype(ModelKind::task) task, decltype(ModelKind::hf_mapping) hf_mapping,
                         decltype(ModelKind::hf_config) hf_config) {
  return {.type = type,
          .family = std::move(family),
          .shape = transformer_shape,
          .build = build,
          .task = task,
          .example = lm_example,
          .rows_per_sample = sequence_length,
          .extra_flops_per_row = transformer_attention_flops,
          .attention = causal_attention,
          .eval_batch = eval_batch_is_micro,
          .generates_with = "gpt2",
          .hf_mapping = hf_mapping,
          .hf_config = hf_config};
}

MicroBatch image_example(const config::Config& c, int64_t n) {
  return {{Tensor::zeros({n, model_kind(c).input_features(c)})}, Tensor::zeros({n}, DType::i32), n};
}

MicroBatch lm_example(const config::Config& c, int64_t n) {
  const int64_t T = sequence_length(c);
  return {{Tensor::zeros({n, T}, DType::i32)}, Tensor::zeros({n * T}, DType::i32), n};
}

MicroBatch masked_example(const config::Config& c, int64_t n, bool per_token) {
  const int64_t T = sequence_length(c);
  return {{Tensor::zeros({n, T}, DType::i32), Tensor::zeros({n, T}, DType::i32)},
          Tensor::zeros({per_token ? n * T : n}, DType::i32), n};
}

int64_t sequence_length(const config::Config& c) {
  const int64_t block = model_kind(c).shape(c).block_size;
  return c.data.seq_len > 0 ? std::min(c.data.seq_len, block) : block;
}

int64_t HfFields::integer(const char* key) const {
  if (!has(key)) refuse(key, "is missing");
  return integer(key, 0);
}

int64_t HfFields::integer(const char* key, int64_t fallback) const {
  if (!has(key)) return fallback;
  const nlohmann::json& v = hf[key];
  // At most 2^31: every size a config.json gives fits there, and products of two stay in int64.
  if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > (int64_t(1) << 31))
    refuse(key, "must be an integer in 1..2^31, got " + config::detail::short_dump(v));
  return v.get<int64_t>();
}

double HfFields::number(const char* key, double fallback) const {
  if (!has(key)) return fallback;
  if (!hf[key].is_number()) refuse(key, "must be a number, got " + config::detail::short_dump(hf[key]));
  return hf[key].get<double>();
}

bool HfFields::flag(const char* key, bool fallback) const {
  if (!has(key)) return fallback;
  if (!hf[key].is_boolean()) refuse(key, "must be true or false, got " + config::detail::short_dump(hf[key]));
  return hf[key].get<bool>();
}

std::string HfFields::text(const char* key, const std::string& fallback) const {
  if (!has(key)) return fallback;
  if (!hf[key].is_string()) refuse(key, "must be a string, got " + hf[key].dump());
  return hf[key].get<std::string>();
}

void HfFields::refuse(const char* key, const std::string& why) const {
  ZT_THROW_AS(ErrorKind::config, "[config] ", file, ": '", key, "' ", why);
}

}  // namespace zt::apps
