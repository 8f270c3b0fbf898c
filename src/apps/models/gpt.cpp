// model.type gpt: a GPT-2 language model (nn::make_gpt) trained on token shards of the gpt2
// tokenizer; `generate` samples from it.
#include "../session.h"
#include "../tasks.h"
#include "model_kind.h"
#include "shared.h"

namespace zt::apps {

extern const ModelKind kGpt{
    .type = "gpt",
    .build = [](const config::Config& c,
                bool) { return std::shared_ptr<nn::Module>(nn::make_gpt(transformer_config(c))); },
    .task = [](const config::Config& c, bool with_train) { return make_token_task(c, "gpt2", with_train); },
    .example = lm_example,
    .rows_per_sample = sequence_length,
    .eval_batch = eval_batch_is_micro,
    .generates_with = "gpt2",
};

}  // namespace zt::apps
