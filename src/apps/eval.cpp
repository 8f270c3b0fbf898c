// `zerotrain eval`: the task's evaluation of saved weights (test accuracy, or validation loss for a
// language model) in one process and the working precision, so it reproduces what training printed.
#include <cstdio>

#include "commands.h"
#include "session.h"
#include "tasks.h"
#include "zt/autograd/autograd.h"
#include "zt/comm/group.h"
#include "train_common.h"
#include "zt/ops/ops.h"
#include "zt/zero/products.h"

namespace zt::apps {

int run_eval(const config::Config& cfg, const std::string& weights_path, bool json) {
  auto model = build_model(cfg);
  load_weights(cfg, *model, weights_path);
  const DType dt = engine_options(cfg, config::BatchSizes{1, 1, 1}).dtype;
  const Device dev = open_run_device(cfg);  // the batches go up, the scores come down
  auto group = comm::make_group("local");
  DType compute = dt;  // as `train` computes: the 16-bit values, in f32 on the f32 product path (Note [f32 compute])
  if (dt != DType::f32) {
    const int64_t micro = config::resolve_batch(cfg, 1).micro;
    if (zero::choose_products(*group, dt, cfg.run.bf16_products, product_shape(cfg, *model, micro)).f32_compute(dev))
      compute = DType::f32;
    for (auto& [name, p] : model->named_parameters()) {
      TagScope tag(MemTag::param);
      Tensor c = ops::cast(p, dt);
      if (compute != dt) c = ops::cast(c, compute);
      p.rebind(c.storage(), c.offset(), compute);
    }
  }
  model->to(dev);
  std::unique_ptr<Task> task = make_task(cfg, /*with_train=*/false);
  autograd::NoGradGuard no_grad;
  model->train(false);
  const EvalResult ev = task->evaluate(
      [&](const std::vector<Tensor>& in) {
        std::vector<Tensor> cast;
        for (const Tensor& host : in) {
          const Tensor x = host.to(dev);
          cast.push_back(is_floating(x.dtype()) && x.dtype() != compute ? ops::cast(x, compute) : x);
        }
        return (*model)(cast);
      },
      *group, task->eval_batch(config::resolve_batch(cfg, 1).micro), /*whole=*/true);
  std::printf("%s\n", json ? ev.metrics.dump().c_str() : ev.line.c_str());
  return 0;
}

}  // namespace zt::apps
