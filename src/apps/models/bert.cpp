// model.type bert: a BERT encoder (nn::make_bert) with a masked-LM head (model.head mlm, trained
// on token shards of the bert tokenizer) or a [CLS] classifier (model.head classify).
#include "../session.h"
#include "../tasks.h"
#include "model_kind.h"
#include "shared.h"

namespace zt::apps {

namespace {

struct BertKeys : TransformerKeys {
  int64_t type_vocab_size = 2;
  std::string head = "mlm";  // mlm (pretraining) | classify ([CLS] classifier, num_classes labels)
  int64_t num_classes = 10;
  std::string hidden_act = "gelu_new";  // GELU's tanh form (gelu_new) or its erf form (gelu, HF BERT's)
  bool pooler = false;                  // classify: bert.pooler (dense + tanh) on [CLS], as HF's classifier
};

std::vector<std::string> keys() {
  std::vector<std::string> k = transformer_keys();
  k.insert(k.end(), {"type_vocab_size", "head", "num_classes", "hidden_act", "pooler"});
  return k;
}

std::shared_ptr<const config::ModelKeys> parse(const config::Section& s) {
  auto k = std::make_shared<BertKeys>();
  read_transformer_keys(s, *k);
  s.read_int("type_vocab_size", k->type_vocab_size, 1, 1 << 10);
  s.read_choice("head", k->head, {"mlm", "classify"});
  s.read_int("num_classes", k->num_classes, 2);
  s.read_choice("hidden_act", k->hidden_act, {"gelu_new", "gelu"});
  s.read_bool("pooler", k->pooler);
  return k;
}

void check_bert(const config::Config& c, const std::string& source) {
  const BertKeys& k = c.model.as<BertKeys>();
  ZT_CHECK_AS(ErrorKind::config, !k.pooler || k.head == "classify", "[config] ", source,
              ": model.pooler is for model.head classify (the masked-LM head reads every position; nearest valid: "
              "false)");
}

// BertForMaskedLM's and BertForSequenceClassification's config.json as our keys.
nlohmann::json from_hf(const nlohmann::json& hf, const std::string& file) {
  const HfFields f{hf, file};
  bool classify = false;
  for (const auto& a : hf.value("architectures", nlohmann::json::array()))
    classify = classify || a == "BertForSequenceClassification";
  const int64_t n_embd = f.integer("hidden_size");
  if (f.integer("intermediate_size", 4 * n_embd) != 4 * n_embd)
    f.refuse("intermediate_size", "is not 4 * hidden_size; model.type bert's MLP is 4 * hidden_size wide");
  const std::string act = f.text("hidden_act", "gelu");
  if (act != "gelu" && act != "gelu_new" && act != "gelu_pytorch_tanh")
    f.refuse("hidden_act", "is '" + act + "'; model.type bert computes GELU (gelu, gelu_new or gelu_pytorch_tanh)");
  if (f.number("layer_norm_eps", 1e-12) != 1e-12)
    f.refuse("layer_norm_eps", "is not 1e-12; model.type bert's layer norms use 1e-12");
  if (f.text("position_embedding_type", "absolute") != "absolute")
    f.refuse("position_embedding_type", "is not absolute; model.type bert learns absolute positions");
  nlohmann::json k = {{"n_embd", n_embd},
                      {"n_layer", f.integer("num_hidden_layers")},
                      {"n_head", f.integer("num_attention_heads")},
                      {"block_size", f.integer("max_position_embeddings", 512)},
                      {"type_vocab_size", f.integer("type_vocab_size", 2)},
                      {"vocab_size", f.integer("vocab_size")},
                      {"head", classify ? "classify" : "mlm"},
                      {"hidden_act", act == "gelu" ? "gelu" : "gelu_new"},
                      {"pooler", classify}};
  if (classify)
    k["num_classes"] = f.integer(
        "num_labels", hf.contains("id2label") && hf["id2label"].is_object() ? int64_t(hf["id2label"].size()) : 2);
  return k;
}

// query/key/value are rows of attention.self.qkv; the MLM decoder is tied to the word embedding.
ckpt::HfMapping hf_mapping(const config::Config& c, const ParamShapes& params, const std::vector<std::string>&) {
  ckpt::HfMapping m;
  const std::string qkv = ".attention.self.qkv.";
  for (const auto& [name, shape] : params) {
    const size_t at = name.find(qkv);
    if (at == std::string::npos) {
      m.params.push_back(ckpt::hf_same(name, shape));
      continue;
    }
    const std::string base = name.substr(0, at) + ".attention.self.", leaf = name.substr(at + qkv.size());
    const int64_t c = shape[0] / 3;
    m.params.push_back(ckpt::hf_rows(
        name, shape, {{base + "query." + leaf, c}, {base + "key." + leaf, c}, {base + "value." + leaf, c}}));
  }
  m.tied = {{"cls.predictions.decoder.weight", "bert.embeddings.word_embeddings.weight"},
            {"cls.predictions.decoder.bias", "cls.predictions.bias"}};
  m.buffers = {"bert.embeddings.position_ids"};
  // A pretraining folder (BertForPreTraining, as bert-base-uncased) also holds the pooler and the
  // next-sentence head; the masked-LM model has neither, and transformers skips them too.
  if (c.model.as<BertKeys>().head == "mlm")
    m.buffers.insert(m.buffers.end(), {"bert.pooler.dense.weight", "bert.pooler.dense.bias",
                                       "cls.seq_relationship.weight", "cls.seq_relationship.bias"});
  return m;
}

nlohmann::json hf_config(const config::Config& c) {
  const BertKeys& k = c.model.as<BertKeys>();
  const bool classify = k.head == "classify";
  ZT_CHECK_AS(ErrorKind::config, !classify || k.pooler,
              "[export] model.pooler is false: transformers' BertForSequenceClassification always has a pooler, so "
              "its folder would not give this model's scores (train the classifier with model.pooler=true)");
  nlohmann::json j = {{"architectures", {classify ? "BertForSequenceClassification" : "BertForMaskedLM"}},
                      {"model_type", "bert"},
                      {"vocab_size", k.vocab_size},
                      {"hidden_size", k.n_embd},
                      {"num_hidden_layers", k.n_layer},
                      {"num_attention_heads", k.n_head},
                      {"intermediate_size", 4 * k.n_embd},
                      {"hidden_act", k.hidden_act},
                      {"hidden_dropout_prob", k.dropout},
                      {"attention_probs_dropout_prob", k.dropout},
                      {"max_position_embeddings", k.block_size},
                      {"type_vocab_size", k.type_vocab_size},
                      {"initializer_range", 0.02},
                      {"layer_norm_eps", 1e-12},
                      {"position_embedding_type", "absolute"},
                      {"pad_token_id", 0}};
  if (classify) j["num_labels"] = k.num_classes;
  return j;
}

}  // namespace

extern const ModelKind kBert{
    .type = "bert",
    .family = {.keys = keys(),
               .parse = parse,
               .check = check_bert,
               .hf_architectures = {"BertForMaskedLM", "BertForSequenceClassification"},
               .from_hf = from_hf},
    .shape =
        [](const config::Config& c) {
          ModelShape s = transformer_shape(c);
          s.num_classes = c.model.as<BertKeys>().num_classes;
          return s;
        },
    .build =
        [](const config::Config& c, bool) {
          const BertKeys& k = c.model.as<BertKeys>();
          nn::TransformerConfig t = transformer_config(k, c);
          t.type_vocab_size = k.type_vocab_size;
          t.gelu = k.hidden_act == "gelu" ? ops::Gelu::erf : ops::Gelu::tanh;
          return std::shared_ptr<nn::Module>(nn::make_bert(t, k.head, k.num_classes, k.pooler));
        },
    .task =
        [](const config::Config& c, bool with_train) {
          const std::string& head = c.model.as<BertKeys>().head;
          if (head == "mlm" && c.data.dataset == "tokens") return make_token_task(c, "bert", with_train);
          if (head == "classify" && c.data.dataset == "classify") return make_classify_task(c, with_train);
          refuse_dataset(c, "tokens with model.head mlm, or classify with model.head classify");
        },
    .example = [](const config::Config& c,
                  int64_t n) { return masked_example(c, n, /*per_token=*/c.model.as<BertKeys>().head == "mlm"); },
    .rows_per_sample = sequence_length,
    .extra_flops_per_row = transformer_attention_flops,
    .attention =
        [](const config::Config& c) {
          AttentionHeads h = causal_attention(c);
          h.key_mask = true;  // its padding, both ways
          return h;
        },
    .eval_batch = eval_batch_is_micro,
    .hf_mapping = hf_mapping,
    .hf_config = hf_config,
};

}  // namespace zt::apps
