// model.type mlp: fully connected layers (model.hidden) on flattened images.
#include "../session.h"
#include "model_kind.h"
#include "shared.h"

namespace zt::apps {

extern const ModelKind kMlp = image_model(
    "mlp",
    [](const config::Config& c, bool deferred) {
      const config::ModelConfig& m = c.model;
      // parse() checked that the count and its fp32 bytes fit in int64.
      return build_within_memory(config::mlp_parameter_count(m).value_or(0), deferred, [&] {
        return std::shared_ptr<nn::Module>(nn::make_mlp(m.input_dim, m.hidden, m.num_classes, m.activation, c.seed));
      });
    },
    input_dim_features, " (model.input_dim)");

}  // namespace zt::apps
