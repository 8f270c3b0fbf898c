// The CPU backend's kernel table (Note [kernel table]): every kernel but the optimizer updates,
// which optim runs in its own vectorised loop on the CPU (Note [device updates]).
#include "../kernel_table.h"
#include "conv_kernels.h"
#include "kernels.h"

namespace zt::ops::detail {

const KernelTable& cpu_table() {
  static const KernelTable t = [] {
    KernelTable k{"cpu"};
#define ZT_CPU_KERNEL(name, sig) k.name = &cpu::name;
    ZT_KERNELS_BUT_UPDATES(ZT_CPU_KERNEL)
#undef ZT_CPU_KERNEL
    return k;
  }();
  return t;
}

}  // namespace zt::ops::detail
