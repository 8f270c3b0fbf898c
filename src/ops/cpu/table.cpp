// The CPU backend's kernel table (Note [kernel table]): every kernel, the optimizer updates
// included (Note [device updates]).
#include "../kernel_table.h"
#include "conv_kernels.h"
#include "kernels.h"

namespace zt::ops::detail {

const KernelTable& cpu_table() {
  static const KernelTable t = ZT_TABLE_OF("cpu", cpu);
  return t;
}

}  // namespace zt::ops::detail
