#include "zt/train/memory_fit.h"

#include <algorithm>

namespace zt::train {

int64_t largest_param(nn::Module& model) {
  int64_t n = 0;
  for (auto& [name, p] : model.named_parameters()) n = std::max(n, p.numel());
  return n;
}

zero::PlacementRequest placement_request(const zero::EngineOptions& opts) {
  const bool beside = !opts.device.is_cpu();
  zero::PlacementRequest req;
  req.optimizer = zero::residence_of(opts.zero.offload_optimizer.device, beside);
  req.param = zero::residence_of(opts.zero.offload_param.device, beside);
  req.stage = int(opts.zero.stage);
  req.device = beside ? opts.device.str() : "";
  return req;
}

MemoryFit fit_memory(nn::Module& model, const zero::EngineOptions& opts, int world, int64_t host_budget,
                     int64_t activations) {
  const int64_t largest = largest_param(model);
  zero::PlacementRequest req = placement_request(opts);
  req.host_cap = host_budget;
  req.host_cap_name = "the memory budget";
  const zero::PlacementChoice choice = zero::place(req, [&](const zero::Placement& at) {
    const zero::EngineOptions o = zero::with_placement(opts, at);
    zero::PeakInput in;
    static_cast<zero::StepLimits&>(in) = zero::step_limits(o);
    in.largest_param = largest;
    in.activations = activations;
    return zero::predict_peak(zero::plan_model(model, o, world), in);
  });
  return {zero::with_placement(opts, choice.placement), choice.peak, choice.lines};
}

}  // namespace zt::train
