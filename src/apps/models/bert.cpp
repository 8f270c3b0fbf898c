// model.type bert: a BERT encoder (nn::make_bert) with a masked-LM head (model.head mlm, trained
// on token shards of the bert tokenizer) or a [CLS] classifier (model.head classify).
#include "../session.h"
#include "../tasks.h"
#include "model_kind.h"
#include "shared.h"

namespace zt::apps {

extern const ModelKind kBert{
    .type = "bert",
    .build =
        [](const config::Config& c, bool) {
          return std::shared_ptr<nn::Module>(nn::make_bert(transformer_config(c), c.model.head, c.model.num_classes));
        },
    // The MLM head as GPT's, and its decoder's bias added into one more logits-sized tensor.
    .activations =
        [](const config::Config& c, int64_t micro, int64_t, double b, bool temp) {
          return transformer_activations(c, micro, b, c.model.head == "mlm" ? 3 * b : 0, temp);
        },
    .task =
        [](const config::Config& c, bool with_train) {
          if (c.model.head == "mlm" && c.data.dataset == "tokens") return make_token_task(c, "bert", with_train);
          if (c.model.head == "classify" && c.data.dataset == "classify") return make_classify_task(c, with_train);
          refuse_dataset(c, "tokens with model.head mlm, or classify with model.head classify");
        },
    .rows_per_sample = sequence_length,
    .eval_batch = eval_batch_is_micro,
};

}  // namespace zt::apps
