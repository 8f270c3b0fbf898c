// The CUDA backend's stub for CPU-only builds: no cuda device, and "pinned" host memory is
// ordinary host memory with its own accounting (so offload code runs and is measured the same).
#include "backend.h"
#include "zt/core/error.h"

namespace zt::detail {

bool cuda_available(int) { return false; }

Allocator& cuda_allocator(int index) {
  ZT_THROW_AS(ErrorKind::invalid_argument, "[core] device ", Device::cuda(index),
              " is not available in this build (built without CUDA)");
}

Allocator& pinned_host_allocator() {
  static Allocator* a = new CachingAllocator(Device::cpu(), "pinned host", host_system_memory());
  return *a;  // never destroyed: storages may outlive statics
}

}  // namespace zt::detail
