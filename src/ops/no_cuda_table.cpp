// A build without CUDA has no CUDA kernel table: table_for() then says "CUDA is not available
// in this build" for any op asked to run on a cuda device (Note [kernel table]).
#include "kernel_table.h"

namespace zt::ops::detail {

const KernelTable* cuda_table() { return nullptr; }

}  // namespace zt::ops::detail
