// The CPU backend's kernel table (Note [kernel table]): every kernel, the optimizer updates
// included (Note [device updates]).
#include "../kernel_table.h"
#include "conv_kernels.h"
#include "kernels.h"

namespace zt::ops::detail {

const KernelTable& cpu_table() {
  static const KernelTable t = [] {
    KernelTable k{"cpu"};
#define ZT_CPU_KERNEL(name, sig) k.name = &cpu::name;
    ZT_KERNELS(ZT_CPU_KERNEL)
#undef ZT_CPU_KERNEL
    return k;
  }();
  return t;
}

}  // namespace zt::ops::detail
