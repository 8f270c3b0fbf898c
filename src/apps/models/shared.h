#pragma once
// What several model entries (Note [model registry]) share: the image classifiers' entry, the
// example micro-batches of each task (Note [measured activations] in dry_run.h) and the sizes
// their data gives.
#include <cstdint>

#include "model_kind.h"
#include "zt/config/config.h"

namespace zt::apps {

inline int64_t input_dim_features(const config::Config& c) { return c.model.input_dim; }  // flattened images
// An image classifier's entry: its own build and input; the image task, one row a sample and
// evaluation batches of up to 1000 images.
ModelKind image_model(const char* type, decltype(ModelKind::build) build, decltype(ModelKind::input_features) features,
                      const char* input_keys);
// Samples per evaluation forward of an image task: 1000, or the test split's limit when smaller.
int64_t image_eval_batch(const config::Config& c, int64_t micro);

// Examples: flattened images and their labels; token ids and their next tokens; ids with an
// attention mask, scored per token (masked LM) or per sequence.
MicroBatch image_example(const config::Config& c, int64_t n);
MicroBatch lm_example(const config::Config& c, int64_t n);
MicroBatch masked_example(const config::Config& c, int64_t n, bool per_token);
// Tokens of a training sequence: data.seq_len, else the model's block.
int64_t sequence_length(const config::Config& c);
inline int64_t eval_batch_is_micro(const config::Config&, int64_t micro) { return micro; }

}  // namespace zt::apps
