// Contracts of the device optimizer updates (Note [device updates] in zt/ops/update.h): every
// tensor on one device, then that device's kernel. optim has checked shapes and dtypes.
#include "zt/ops/update.h"
#include "contract.h"

namespace zt::ops {

namespace {
Device update_device(const DeviceUpdate& u, const char* op) {
  const Device d = u.param.device();
  for (const Tensor* t : {&u.master, &u.grad, &u.s0, &u.s1, &u.widened}) detail::check_on(d, *t, op);
  return d;
}
}  // namespace

void adam_update(const AdamStep& s, const DeviceUpdate& u) {
  ZT_RUN(adam_update, "adam_update", update_device(u, "adam_update"), s, u);
}

void sgd_update(const SgdStep& s, const DeviceUpdate& u) {
  ZT_RUN(sgd_update, "sgd_update", update_device(u, "sgd_update"), s, u);
}

}  // namespace zt::ops
