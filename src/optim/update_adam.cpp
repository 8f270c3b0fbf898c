// Adam and AdamW rules (built with -ffp-contract=off, Note [update loop]).
#include <cmath>

#include "update_loop.h"

namespace zt::optim::detail {
namespace {

// Per-step scalars, computed in double from the float hyper-parameters as torch does with Python floats,
// then rounded to float where torch passes them to a float kernel; a device's kernel takes the same.
using AdamScalars = ops::AdamStep;

// torch 1.13 _single_tensor_adam(w):
//   m = m*b1 + (1-b1)*g;  v = v*b2 + ((1-b2)*g)*g;  denom = sqrt(v)/bc2_sqrt + eps;
//   p = p + (-step_size*m)/denom
template <bool kL2, bool kDecoupled>
struct AdamRule {
  AdamScalars s;
  ZT_ALWAYS_INLINE float operator()(float w, float g, float* __restrict m, float* __restrict v, int64_t i) const {
    if constexpr (kL2) g = std::fma(s.l2, w, g);
    const float mi = std::fma(m[i], s.beta1, s.one_minus_beta1 * g);
    const float vi = std::fma(v[i], s.beta2, s.one_minus_beta2 * g * g);
    const float denom = std::sqrt(vi) / s.bias_correction2_sqrt + s.eps;
    m[i] = mi;
    v[i] = vi;
    const float delta = s.neg_step_size * mi / denom;
    if constexpr (kDecoupled)
      return std::fma(w, s.decay, delta);
    else
      return w + delta;
  }
};

}  // namespace

void update_adam(const FloatHyper& h, bool decoupled, const UpdateArgs& a) {
  const double b1 = h.beta1, b2 = h.beta2, lr = a.lr, wd = h.weight_decay;
  const double step = double(a.step);
  AdamScalars s;
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
  if (!a.param.device().is_cpu())
    ops::adam_update(s, device_update(a));
  else if (decoupled)
    run(a, AdamRule<false, true>{s});
  else if (wd != 0.0)
    run(a, AdamRule<true, false>{s});
  else
    run(a, AdamRule<false, false>{s});
}

}  // namespace zt::optim::detail
