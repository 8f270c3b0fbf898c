// The CUDA backend's kernel table (Note [kernel table]): every kernel, the optimizer updates
// included (Note [device updates]).
#include "../kernel_table.h"
#include "kernels.h"

namespace zt::ops::detail {

const KernelTable* cuda_table() {
  static const KernelTable t = [] {
    KernelTable k{"cuda"};
#define ZT_CUDA_KERNEL(name, sig) k.name = &cuda::name;
    ZT_KERNELS(ZT_CUDA_KERNEL)
#undef ZT_CUDA_KERNEL
    return k;
  }();
  return &t;
}

}  // namespace zt::ops::detail
