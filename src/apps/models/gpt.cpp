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
    // The LM head: the logits and their gradient (Note [activation formula]).
    .activations = [](const config::Config& c, int64_t micro, int64_t, double b,
                      bool temp) { return transformer_activations(c, micro, b, 2 * b, temp); },
    .task = [](const config::Config& c, bool with_train) { return make_token_task(c, "gpt2", with_train); },
    .rows_per_sample = sequence_length,
    .eval_batch = eval_batch_is_micro,
    .generates_with = "gpt2",
};

}  // namespace zt::apps
