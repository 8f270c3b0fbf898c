#pragma once
// Internal: the float hyper-parameters and the per-step scalars of the rules, which run as
// kernels of the parameters' device (Note [device updates] in zt/ops/update.h).
#include "zt/ops/update.h"
#include "zt/optim/optimizer.h"

namespace zt::optim::detail {

// Note [float hyper-parameters]: the config holds doubles; the rules take their float roundings,
// as torch's fp32 kernels do, and the checks in optimizer.cpp judge those (a beta2 that rounds
// to 1 is out of range). Rounded once, in floats_of(), and nowhere else.
struct FloatHyper {
  float lr, beta1, beta2, eps, weight_decay, momentum;
  bool nesterov;
};

// The update's tensors as the kernels take them.
inline ops::DeviceUpdate device_update(const UpdateArgs& a) {
  return {a.param,
          a.master,
          a.grad,
          a.states.size() > 0 ? a.states[0] : Tensor(),
          a.states.size() > 1 ? a.states[1] : Tensor(),
          a.grad_scale,
          a.widened};
}

void update_adam(const FloatHyper& h, bool decoupled, const UpdateArgs& a);
void update_sgd(const FloatHyper& h, const UpdateArgs& a);

}  // namespace zt::optim::detail
