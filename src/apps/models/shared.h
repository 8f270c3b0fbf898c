#pragma once
// What several model entries (Note [model registry]) share: the activation formulas of the two
// families (Note [activation formula]) and the sizes their data gives.
#include <cstdint>
#include <vector>

#include "model_kind.h"
#include "zt/config/config.h"

namespace zt::apps {

// An image classifier: 3x3 convolution stages (each + ReLU + 2x2 pooling; none for an MLP) on
// in_channels x image_size^2 images, then fully connected layers, then the classes.
struct ImageNet {
  int64_t input = 0;  // features per sample
  int64_t in_channels = 0, image_size = 0;
  std::vector<int64_t> conv, fc;
  int64_t classes = 0;
};
int64_t image_activations(const ImageNet& net, int64_t micro, int64_t eval_batch, double b, bool grad_temporary);
inline int64_t input_dim_features(const config::Config& c) { return c.model.input_dim; }  // flattened images
// An image classifier's entry: its own build, activations and input; the image task, one row a
// sample and evaluation batches of up to 1000 images.
ModelKind image_model(const char* type, decltype(ModelKind::build) build,
                      decltype(ModelKind::activations) activations, decltype(ModelKind::input_features) features,
                      const char* input_keys);
// Samples per evaluation forward of an image task: 1000, or the test split's limit when smaller.
int64_t image_eval_batch(const config::Config& c, int64_t micro);

// A transformer of the config's model keys; head_bytes: bytes per vocabulary entry and token the
// LM head keeps (0 for a model without one).
int64_t transformer_activations(const config::Config& c, int64_t micro, double b, double head_bytes,
                                bool grad_temporary);
// Tokens of a training sequence: data.seq_len, else the model's block.
int64_t sequence_length(const config::Config& c);
inline int64_t eval_batch_is_micro(const config::Config&, int64_t micro) { return micro; }

}  // namespace zt::apps
