// SGD's per-step scalars (Note [device updates]).
#include <cmath>

#include "hyper.h"

namespace zt::optim::detail {

void update_sgd(const FloatHyper& h, const UpdateArgs& a) {
  const float wd = h.weight_decay, mom = h.momentum, neg_lr = float(-double(a.lr));
  const ops::SgdStep st{wd, mom, neg_lr, wd != 0.f, mom != 0.f, a.step == 1, h.nesterov};
  ops::sgd_update(st, device_update(a));
}

}  // namespace zt::optim::detail
