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
    .task =
        [](const config::Config& c, bool with_train) {
          if (c.model.head == "mlm" && c.data.dataset == "tokens") return make_token_task(c, "bert", with_train);
          if (c.model.head == "classify" && c.data.dataset == "classify") return make_classify_task(c, with_train);
          refuse_dataset(c, "tokens with model.head mlm, or classify with model.head classify");
        },
    .example = [](const config::Config& c,
                  int64_t n) { return masked_example(c, n, /*per_token=*/c.model.head == "mlm"); },
    .rows_per_sample = sequence_length,
    .eval_batch = eval_batch_is_micro,
};

}  // namespace zt::apps
