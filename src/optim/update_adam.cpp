// Adam and AdamW's per-step scalars (built with -ffp-contract=off: 1 - lr * wd must not fuse): computed
// in double from the float hyper-parameters as torch does with Python floats, then rounded to
// float where torch passes them to a float kernel; every device's kernel takes the same.
#include <cmath>

#include "hyper.h"

namespace zt::optim::detail {

void update_adam(const FloatHyper& h, bool decoupled, const UpdateArgs& a) {
  const double b1 = h.beta1, b2 = h.beta2, lr = a.lr, wd = h.weight_decay;
  const double step = double(a.step);
  ops::AdamStep s;
  s.beta1 = h.beta1;
  s.one_minus_beta1 = float(1.0 - b1);
  s.beta2 = h.beta2;
  s.one_minus_beta2 = float(1.0 - b2);
  s.eps = h.eps;
  s.bias_correction2_sqrt = float(std::sqrt(1.0 - std::pow(b2, step)));
  s.neg_step_size = float(-(lr / (1.0 - std::pow(b1, step))));
  s.l2 = h.weight_decay;
  s.decay = float(1.0 - lr * wd);  // lr * wd of two floats is exact in double
  s.decoupled = decoupled;
  s.l2_on = !decoupled && wd != 0.0;
  ops::adam_update(s, device_update(a));
}

}  // namespace zt::optim::detail
