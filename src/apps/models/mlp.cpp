// model.type mlp: fully connected layers (model.hidden) on flattened images.
#include "../session.h"
#include "model_kind.h"
#include "shared.h"

namespace zt::apps {

extern const ModelKind kMlp = image_model(
    "mlp",
    mlp_family([](const config::Config& c, const std::string& source) {
      const MlpKeys& m = c.model.as<MlpKeys>();
      check_parameter_count(mlp_parameter_count(m), source,
                            "model.input_dim " + std::to_string(m.input_dim) + ", model.hidden " +
                                config::detail::short_dump(m.hidden) + " and model.num_classes " +
                                std::to_string(m.num_classes));
    }),
    [](const config::Config& c, bool deferred) {
      const MlpKeys& m = c.model.as<MlpKeys>();
      // parse() checked that the count and its fp32 bytes fit in int64.
      return build_within_memory(mlp_parameter_count(m).value_or(0), deferred, [&] {
        return std::shared_ptr<nn::Module>(nn::make_mlp(m.input_dim, m.hidden, m.num_classes, m.activation, c.seed));
      });
    },
    mlp_shape,
    input_dim_features, " (model.input_dim)");

}  // namespace zt::apps
