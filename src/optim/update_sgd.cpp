// SGD rules (built with -ffp-contract=off, Note [update loop]).
#include <cmath>

#include "update_loop.h"

namespace zt::optim::detail {
namespace {

// torch 1.13 _single_tensor_sgd with dampening 0:
//   d = g + wd*p;  buf = first ? d : buf*mom + d;  d = nesterov ? d + mom*buf : buf;
//   p = p + (-lr)*d
template <bool kWd, bool kMomentum, bool kFirst, bool kNesterov>
struct SgdRule {
  float wd, mom, neg_lr;
  ZT_ALWAYS_INLINE float operator()(float w, float g, float* __restrict buf, float*, int64_t i) const {
    float d = g;
    if constexpr (kWd) d = std::fma(wd, w, d);
    if constexpr (kMomentum) {
      const float b = kFirst ? d : std::fma(buf[i], mom, d);
      buf[i] = b;
      d = kNesterov ? std::fma(mom, b, d) : b;
    }
    return std::fma(neg_lr, d, w);
  }
};

template <bool kWd>
void run_momentum(const UpdateArgs& a, bool first, bool nesterov, float wd, float mom, float neg_lr) {
  // One instantiation per flag combination keeps each inner loop branch-free.
  if (first && nesterov)
    run(a, SgdRule<kWd, true, true, true>{wd, mom, neg_lr});
  else if (first)
    run(a, SgdRule<kWd, true, true, false>{wd, mom, neg_lr});
  else if (nesterov)
    run(a, SgdRule<kWd, true, false, true>{wd, mom, neg_lr});
  else
    run(a, SgdRule<kWd, true, false, false>{wd, mom, neg_lr});
}

}  // namespace

void update_sgd(const FloatHyper& h, const UpdateArgs& a) {
  const float wd = h.weight_decay, mom = h.momentum, neg_lr = float(-double(a.lr));
  const bool has_wd = wd != 0.f;
  if (!a.param.device().is_cpu()) {
    const ops::SgdStep st{wd, mom, neg_lr, has_wd, mom != 0.f, a.step == 1, h.nesterov};
    return ops::sgd_update(st, device_update(a));
  }
  if (mom == 0.f) {
    if (has_wd)
      run(a, SgdRule<true, false, false, false>{wd, mom, neg_lr});
    else
      run(a, SgdRule<false, false, false, false>{wd, mom, neg_lr});
    return;
  }
  const bool first = a.step == 1;
  if (has_wd)
    run_momentum<true>(a, first, h.nesterov, wd, mom, neg_lr);
  else
    run_momentum<false>(a, first, h.nesterov, wd, mom, neg_lr);
}

}  // namespace zt::optim::detail
