// model.type cnn: 3x3 convolution stages (model.channels), each with ReLU and 2x2 max pooling,
// then fully connected layers (model.fc) (nn::make_cnn).
#include "../session.h"
#include "model_kind.h"
#include "shared.h"
#include "zt/nn/conv.h"

namespace zt::apps {

extern const ModelKind kCnn = image_model(
    "cnn",
    [](const config::Config& c, bool deferred) {
      const config::ModelConfig& m = c.model;
      // parse() checked that the count and its fp32 bytes fit in int64.
      return build_within_memory(config::cnn_parameter_count(m).value_or(0), deferred, [&] {
        return std::shared_ptr<nn::Module>(
            nn::make_cnn(m.in_channels, m.image_size, m.channels, m.fc, m.num_classes, c.seed));
      });
    },
    [](const config::Config& c) { return c.model.in_channels * c.model.image_size * c.model.image_size; },
    " (model.in_channels x model.image_size^2)");

}  // namespace zt::apps
