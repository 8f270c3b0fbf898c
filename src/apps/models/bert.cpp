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
};

std::vector<std::string> keys() {
  std::vector<std::string> k = transformer_keys();
  k.insert(k.end(), {"type_vocab_size", "head", "num_classes"});
  return k;
}

std::shared_ptr<const config::ModelKeys> parse(const config::Section& s) {
  auto k = std::make_shared<BertKeys>();
  read_transformer_keys(s, *k);
  s.read_int("type_vocab_size", k->type_vocab_size, 1, 1 << 10);
  s.read_choice("head", k->head, {"mlm", "classify"});
  s.read_int("num_classes", k->num_classes, 2);
  return k;
}

}  // namespace

extern const ModelKind kBert{
    .type = "bert",
    .family = {.keys = keys(), .parse = parse},
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
          return std::shared_ptr<nn::Module>(nn::make_bert(t, k.head, k.num_classes));
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
    .eval_batch = eval_batch_is_micro,
};

}  // namespace zt::apps
