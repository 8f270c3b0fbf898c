// model.type gpt: a GPT-2 language model (nn::make_gpt) trained on token shards of the gpt2
// tokenizer; `generate` samples from it.
#include "../session.h"
#include "../tasks.h"
#include "model_kind.h"
#include "shared.h"

namespace zt::apps {

extern const ModelKind kGpt{
    .type = "gpt",
    .family = {.keys = transformer_keys(),
               .parse =
                   [](const config::Section& s) {
                     auto k = std::make_shared<TransformerKeys>();
                     read_transformer_keys(s, *k);
                     return std::shared_ptr<const config::ModelKeys>(std::move(k));
                   }},
    .shape = transformer_shape,
    .build =
        [](const config::Config& c, bool) {
          return std::shared_ptr<nn::Module>(nn::make_gpt(transformer_config(c.model.as<TransformerKeys>(), c)));
        },
    .task = [](const config::Config& c, bool with_train) { return make_token_task(c, "gpt2", with_train); },
    .example = lm_example,
    .rows_per_sample = sequence_length,
    .eval_batch = eval_batch_is_micro,
    .generates_with = "gpt2",
};

}  // namespace zt::apps
