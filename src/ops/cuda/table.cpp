// The CUDA backend's kernel table (Note [kernel table]): every kernel, the optimizer updates
// included (Note [device updates]).
#include "../kernel_table.h"
#include "kernels.h"

namespace zt::ops::detail {

const KernelTable* cuda_table() {
  static const KernelTable t = ZT_TABLE_OF("cuda", cuda);
  return &t;
}

}  // namespace zt::ops::detail
