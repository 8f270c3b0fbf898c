#include "trainer.h"

namespace zt::apps {

// A strategy's limits are config::parse's (e.g. no checkpoints for the parameter server).
std::unique_ptr<Trainer> make_trainer(const TrainerContext& ctx) {
  if (ctx.cfg.run.strategy == "parameter_server") return make_ps_trainer(ctx);
  return make_zero_trainer(ctx);
}

}  // namespace zt::apps
