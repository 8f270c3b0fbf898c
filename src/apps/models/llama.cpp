// model.type llama: a Llama-family decoder (nn::make_llama) trained on token shards; `generate`
// samples from it. GPT-2's tokenizer until a Llama tokenizer is read (tokenizer.json).
#include <algorithm>
#include <cmath>

#include "../session.h"
#include "../tasks.h"
#include "llama.h"
#include "model_kind.h"
#include "shared.h"
#include "zt/nn/llama.h"

namespace zt::apps {

namespace {

std::vector<std::string> keys() {
  std::vector<std::string> k = transformer_keys();
  k.insert(k.end(), {"n_kv_head", "intermediate_size", "rope_theta", "rms_norm_eps", "tie_word_embeddings", "qkv_bias"});
  return k;
}

std::shared_ptr<const config::ModelKeys> parse(const config::Section& s) {
  auto k = std::make_shared<LlamaKeys>();
  read_transformer_keys(s, *k);
  s.read_int("n_kv_head", k->n_kv_head, 1, 1 << 12);
  s.read_int("intermediate_size", k->intermediate_size, 1, 1 << 20);
  s.read_number("rope_theta", k->rope_theta, 0, true);
  s.read_number("rms_norm_eps", k->rms_norm_eps, 0, true, 1, false);
  s.read_bool("tie_word_embeddings", k->tie_word_embeddings);
  s.read_bool("qkv_bias", k->qkv_bias);
  return k;
}

// 8/3 of the width, rounded up to a multiple of 64: Llama's SwiGLU width for a given width.
int64_t default_intermediate(int64_t n_embd) { return (8 * n_embd / 3 + 63) / 64 * 64; }

nn::LlamaConfig llama_config(const config::Config& c) {
  const LlamaKeys& m = c.model.as<LlamaKeys>();
  nn::LlamaConfig l;
  l.vocab_size = m.vocab_size;
  l.block_size = m.block_size;
  l.n_layer = m.n_layer;
  l.n_head = m.n_head;
  l.n_kv_head = m.n_kv_head > 0 ? m.n_kv_head : m.n_head;
  l.n_embd = m.n_embd;
  l.intermediate_size = m.intermediate_size > 0 ? m.intermediate_size : default_intermediate(m.n_embd);
  l.rope_theta = float(m.rope_theta);
  l.rms_norm_eps = float(m.rms_norm_eps);
  l.tie_word_embeddings = m.tie_word_embeddings;
  l.qkv_bias = m.qkv_bias;
  l.activation_checkpointing = c.activation_checkpointing.enabled;
  l.checkpoint_blocks =
      c.activation_checkpointing.number_checkpoints > 0 ? c.activation_checkpointing.number_checkpoints : -1;
  l.seed = c.seed;
  return l;
}

// Before step 1: the keys against each other (nn::LlamaConfig::validate names the key), and the
// settings the family has no use for.
void check_llama(const config::Config& c, const std::string& source) {
  const LlamaKeys& m = c.model.as<LlamaKeys>();
  ZT_CHECK_AS(ErrorKind::config, m.dropout == 0.0, "[config] ", source, ": model.dropout ", m.dropout,
              " is not used by model.type llama (its blocks have no dropout; nearest valid: 0)");
  ZT_CHECK_AS(ErrorKind::config, std::isfinite(float(m.rope_theta)) && float(m.rope_theta) > 0.f,
              "[config] ", source, ": model.rope_theta ", m.rope_theta,
              " does not fit a float above 0 (Llama 2: 10000, Llama 3: 500000)");
  const nn::LlamaConfig l = llama_config(c);
  ZT_CHECK_AS(ErrorKind::config, l.n_kv_head <= l.n_head && l.n_head % l.n_kv_head == 0, "[config] ", source,
              ": model.n_head ", l.n_head, " is not a multiple of model.n_kv_head ", l.n_kv_head,
              " (nearest valid n_kv_head: ", [&] {
                int64_t k = std::min(l.n_kv_head, l.n_head);
                while (l.n_head % k != 0) --k;
                return k;
              }(), ")");
  ZT_CHECK_AS(ErrorKind::config, l.n_embd % l.n_head == 0 && (l.n_embd / l.n_head) % 2 == 0, "[config] ", source,
              ": model.n_embd ", l.n_embd, " / model.n_head ", l.n_head,
              " must be an even head size for rotary embeddings (nearest valid n_embd: ",
              std::max<int64_t>(2 * l.n_head, (l.n_embd + l.n_head) / (2 * l.n_head) * 2 * l.n_head), ")");
  l.validate();
}

}  // namespace

extern const ModelKind kLlama{
    .type = "llama",
    .family = {.keys = keys(), .parse = parse, .check = check_llama},
    .shape = transformer_shape,
    .build = [](const config::Config& c, bool) { return nn::make_llama(llama_config(c)); },
    // Any tokenizer's shards (GPT-2's, Llama 3's tokenizer.json, a SentencePiece model).
    .task = [](const config::Config& c, bool with_train) { return make_token_task(c, "", with_train); },
    .example = lm_example,
    .rows_per_sample = sequence_length,
    .eval_batch = eval_batch_is_micro,
    .generates_with = "gpt2",
};

}  // namespace zt::apps
