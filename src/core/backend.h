#pragma once
// What a device backend provides to the core. Which file defines these is chosen at build time:
// no_cuda.cpp on a CPU-only build (see DESIGN.md, "Layers").
#include "zt/core/allocator.h"

namespace zt::detail {

bool cuda_available(int index);
Allocator& cuda_allocator(int index);  // throws when the device is not available
Allocator& pinned_host_allocator();    // cudaHostAlloc with CUDA, ordinary host memory without

}  // namespace zt::detail
