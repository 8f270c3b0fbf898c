// model.type gpt: a GPT-2 language model (nn::make_gpt) trained on token shards of the gpt2
// tokenizer; `generate` samples from it. Hugging Face's GPT2LMHeadModel in and out.
#include "../session.h"
#include "../tasks.h"
#include "model_kind.h"
#include "shared.h"

namespace zt::apps {

namespace {

// GPT2LMHeadModel's config.json as our keys; what nn::make_gpt does not compute is refused.
nlohmann::json from_hf(const nlohmann::json& hf, const std::string& file) {
  const HfFields f{hf, file};
  const std::string act = f.text("activation_function", "gelu_new");
  if (act != "gelu_new" && act != "gelu_pytorch_tanh")
    f.refuse("activation_function", "is '" + act + "'; model.type gpt computes GELU's tanh form (gelu_new)");
  if (f.number("layer_norm_epsilon", 1e-5) != 1e-5)
    f.refuse("layer_norm_epsilon", "is " + hf["layer_norm_epsilon"].dump() + "; model.type gpt's layer norms use 1e-5");
  for (const char* key : {"scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn", "add_cross_attention"})
    if (f.flag(key, false)) f.refuse(key, "is true; model.type gpt has no such attention");
  if (!f.flag("scale_attn_weights", true)) f.refuse("scale_attn_weights", "is false; model.type gpt scales by 1/sqrt(d)");
  const int64_t n_embd = f.integer("n_embd");
  if (f.has("n_inner") && f.integer("n_inner") != 4 * n_embd)
    f.refuse("n_inner", "is not 4 * n_embd; model.type gpt's MLP is 4 * n_embd wide");
  return {{"n_embd", n_embd},
          {"n_layer", f.integer("n_layer")},
          {"n_head", f.integer("n_head")},
          {"block_size", f.integer("n_positions", f.integer("n_ctx", 1024))},
          {"vocab_size", f.integer("vocab_size")}};
}

// Conv1D keeps these [in, out]: transposed both ways.
bool conv1d(const std::string& name) {
  for (const char* s : {"attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight"})
    if (name.size() >= std::string(s).size() && name.compare(name.size() - std::string(s).size(), std::string::npos, s) == 0)
      return true;
  return false;
}

ckpt::HfMapping hf_mapping(const config::Config& c, const ParamShapes& params, const std::vector<std::string>& folder) {
  // transformers writes "transformer.h.0..."; some folders (the Hub's gpt2) have no prefix.
  bool prefixed = folder.empty();
  for (const std::string& n : folder) prefixed = prefixed || n.rfind("transformer.", 0) == 0;
  const std::string pre = prefixed ? "transformer." : "";
  ckpt::HfMapping m;
  for (const auto& [name, shape] : params) {
    ckpt::HfParam p = ckpt::hf_same(name, shape);
    p.pieces[0].tensor = pre + name;
    p.pieces[0].transpose = conv1d(name);
    m.params.push_back(p);
  }
  m.tied.push_back({"lm_head.weight", pre + "wte.weight"});
  for (int64_t i = 0; i < c.model.as<TransformerKeys>().n_layer; ++i)
    for (const char* b : {".attn.bias", ".attn.masked_bias"})  // the causal mask, a buffer
      m.buffers.push_back(pre + "h." + std::to_string(i) + b);
  return m;
}

nlohmann::json hf_config(const config::Config& c) {
  const auto& k = c.model.as<TransformerKeys>();
  nlohmann::json j = {{"architectures", {"GPT2LMHeadModel"}},
                      {"model_type", "gpt2"},
                      {"vocab_size", k.vocab_size},
                      {"n_positions", k.block_size},
                      {"n_ctx", k.block_size},
                      {"n_embd", k.n_embd},
                      {"n_layer", k.n_layer},
                      {"n_head", k.n_head},
                      {"n_inner", nullptr},
                      {"activation_function", "gelu_new"},
                      {"layer_norm_epsilon", 1e-5},
                      {"resid_pdrop", k.dropout},
                      {"embd_pdrop", k.dropout},
                      {"attn_pdrop", k.dropout},
                      {"initializer_range", 0.02},
                      {"scale_attn_weights", true},
                      {"tie_word_embeddings", true},
                      {"use_cache", true}};
  if (k.vocab_size > 50256) j["bos_token_id"] = j["eos_token_id"] = 50256;  // GPT-2's <|endoftext|>
  return j;
}

}  // namespace

extern const ModelKind kGpt = language_model(
    "gpt",
    {.keys = transformer_keys(),
     .parse =
         [](const config::Section& s) {
           auto k = std::make_shared<TransformerKeys>();
           read_transformer_keys(s, *k);
           return std::shared_ptr<const config::ModelKeys>(std::move(k));
         },
     .hf_architectures = {"GPT2LMHeadModel"},
     .from_hf = from_hf},
    [](const config::Config& c, bool) {
      return std::shared_ptr<nn::Module>(nn::make_gpt(transformer_config(c.model.as<TransformerKeys>(), c)));
    },
    [](const config::Config& c, bool with_train) { return make_token_task(c, "gpt2", with_train); }, hf_mapping,
    hf_config);

}  // namespace zt::apps
