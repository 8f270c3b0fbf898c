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

// LlamaForCausalLM, Qwen2ForCausalLM and MistralForCausalLM's config.json as our keys; what
// nn::make_llama does not compute (rope scaling, a sliding window shorter than the sequence,
// other activations, o_proj or MLP biases) is refused.
nlohmann::json from_hf(const nlohmann::json& hf, const std::string& file) {
  const HfFields f{hf, file};
  bool qwen2 = false, mistral = false;
  for (const auto& a : hf.value("architectures", nlohmann::json::array()))
    qwen2 = qwen2 || a == "Qwen2ForCausalLM", mistral = mistral || a == "MistralForCausalLM";
  if (f.has("rope_scaling"))
    f.refuse("rope_scaling", "is " + hf["rope_scaling"].dump() + "; model.type llama has plain rotary positions only (null)");
  if (f.text("hidden_act", "silu") != "silu") f.refuse("hidden_act", "is not silu; model.type llama's MLP is SwiGLU");
  if (f.flag("mlp_bias", false)) f.refuse("mlp_bias", "is true; model.type llama's MLP has no biases");
  const bool attention_bias = f.flag("attention_bias", false);
  if (attention_bias && !qwen2)
    f.refuse("attention_bias", "is true; model.type llama has q/k/v biases (Qwen2) but no o_proj bias");
  const int64_t block = f.integer("max_position_embeddings", 2048);
  const bool windowed = mistral || f.flag("use_sliding_window", false);
  if (windowed && f.has("sliding_window") && f.integer("sliding_window") < block)
    f.refuse("sliding_window", "is " + hf["sliding_window"].dump() + ", below max_position_embeddings " +
                                   std::to_string(block) +
                                   "; model.type llama attends to the whole sequence (allowed: null, or >= the "
                                   "sequence length)");
  const int64_t n_embd = f.integer("hidden_size"), n_head = f.integer("num_attention_heads");
  if (f.has("head_dim") && f.integer("head_dim") * n_head != n_embd)
    f.refuse("head_dim", "is not hidden_size / num_attention_heads; model.type llama's heads split the width");
  return {{"n_embd", n_embd},
          {"n_layer", f.integer("num_hidden_layers")},
          {"n_head", n_head},
          {"n_kv_head", f.integer("num_key_value_heads", n_head)},
          {"intermediate_size", f.integer("intermediate_size")},
          {"rope_theta", f.number("rope_theta", 10000.0)},
          {"rms_norm_eps", f.number("rms_norm_eps", 1e-6)},
          {"tie_word_embeddings", f.flag("tie_word_embeddings", false)},
          {"block_size", block},
          {"vocab_size", f.integer("vocab_size")},
          {"qkv_bias", qwen2 || attention_bias}};
}

// q_proj/k_proj/v_proj are rows of self_attn.qkv_proj, gate_proj/up_proj of mlp.gate_up_proj.
ckpt::HfMapping hf_mapping(const config::Config& c, const ParamShapes& params, const std::vector<std::string>&) {
  const nn::LlamaConfig l = llama_config(c);
  const int64_t d = l.n_embd / l.n_head, q = l.n_head * d, kv = l.n_kv_head * d;
  ckpt::HfMapping m;
  for (const auto& [name, shape] : params) {
    const size_t at = name.rfind('.');
    const std::string owner = name.substr(0, at), leaf = name.substr(at);  // ".weight" / ".bias"
    const std::string base = owner.substr(0, owner.rfind('.') + 1);
    if (owner.size() > 9 && owner.compare(owner.size() - 9, 9, ".qkv_proj") == 0)
      m.params.push_back(ckpt::hf_rows(
          name, shape, {{base + "q_proj" + leaf, q}, {base + "k_proj" + leaf, kv}, {base + "v_proj" + leaf, kv}}));
    else if (owner.size() > 13 && owner.compare(owner.size() - 13, 13, ".gate_up_proj") == 0)
      m.params.push_back(ckpt::hf_rows(
          name, shape, {{base + "gate_proj" + leaf, l.intermediate_size}, {base + "up_proj" + leaf, l.intermediate_size}}));
    else
      m.params.push_back(ckpt::hf_same(name, shape));
  }
  if (l.tie_word_embeddings) m.tied.push_back({"lm_head.weight", "model.embed_tokens.weight"});
  for (int64_t i = 0; i < l.n_layer; ++i)  // older folders saved the rotary frequencies
    m.buffers.push_back("model.layers." + std::to_string(i) + ".self_attn.rotary_emb.inv_freq");
  return m;
}

nlohmann::json hf_config(const config::Config& c) {
  const nn::LlamaConfig l = llama_config(c);
  const LlamaKeys& k = c.model.as<LlamaKeys>();
  nlohmann::json j = {{"architectures", {l.qkv_bias ? "Qwen2ForCausalLM" : "LlamaForCausalLM"}},
                      {"model_type", l.qkv_bias ? "qwen2" : "llama"},
                      {"vocab_size", l.vocab_size},
                      {"hidden_size", l.n_embd},
                      {"intermediate_size", l.intermediate_size},
                      {"num_hidden_layers", l.n_layer},
                      {"num_attention_heads", l.n_head},
                      {"num_key_value_heads", l.n_kv_head},
                      {"hidden_act", "silu"},
                      {"max_position_embeddings", l.block_size},
                      {"rms_norm_eps", k.rms_norm_eps},
                      {"rope_theta", k.rope_theta},
                      {"rope_scaling", nullptr},
                      {"tie_word_embeddings", l.tie_word_embeddings},
                      {"initializer_range", double(l.init_std) == double(0.02f) ? 0.02 : double(l.init_std)},
                      {"attention_dropout", 0.0},
                      {"use_cache", true}};
  if (l.qkv_bias) {
    j["use_sliding_window"] = false;
    j["sliding_window"] = nullptr;
    j["max_window_layers"] = l.n_layer;
  } else {
    j["attention_bias"] = false;
    j["mlp_bias"] = false;
    j["pretraining_tp"] = 1;
  }
  return j;
}

}  // namespace

extern const ModelKind kLlama = language_model(
    "llama",
    {.keys = keys(),
     .parse = parse,
     .check = check_llama,
     .hf_architectures = {"LlamaForCausalLM", "Qwen2ForCausalLM", "MistralForCausalLM"},
     .from_hf = from_hf},
    [](const config::Config& c, bool) { return nn::make_llama(llama_config(c)); },
    // Any tokenizer's shards (GPT-2's, Llama 3's tokenizer.json, a SentencePiece model).
    [](const config::Config& c, bool with_train) { return make_token_task(c, "", with_train); }, hf_mapping, hf_config);

}  // namespace zt::apps
