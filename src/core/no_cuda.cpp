// The CUDA backend's stub for CPU-only builds: no cuda device, every entry of its table says so
// (Note [device backend table]), and "pinned" host memory is ordinary host memory with its own
// accounting (so offload code runs and is measured the same).
#include "backend.h"
#include "zt/core/error.h"

namespace zt::detail {
namespace {
[[noreturn]] void not_built(int index) {
  ZT_THROW_AS(ErrorKind::invalid_argument, "[core] device ", Device::cuda(index),
              " is not available in this build (built without CUDA)");
}
int device_side(Device dst_dev, Device src_dev) { return dst_dev.is_cpu() ? src_dev.index : dst_dev.index; }

bool cuda_available(int) { return false; }
Allocator& cuda_allocator(int index) { not_built(index); }
void* cuda_stream(int index) { not_built(index); }
void cuda_synchronize(int index) { not_built(index); }
void cuda_copy(void*, Device dst_dev, const void*, Device src_dev, size_t) { not_built(device_side(dst_dev, src_dev)); }
void cuda_memset(void*, int index, int, size_t) { not_built(index); }
size_t cuda_memory_total(int index) { not_built(index); }
void cuda_set_current(int index) { not_built(index); }
EventHandle cuda_copy_async(void*, Device dst_dev, const void*, Device src_dev, size_t) {
  not_built(device_side(dst_dev, src_dev));
}
void cuda_compute_waits(int index, const EventHandle&) { not_built(index); }
void cuda_event_synchronize(int index, const EventHandle&) { not_built(index); }
}  // namespace

int cuda_device_count() { return 0; }

const DeviceBackend& cuda_backend() {
  static const DeviceBackend b = ZT_DEVICE_BACKEND("cuda", cuda);
  return b;
}

Allocator& pinned_host_allocator() {
  static Allocator* a = new CachingAllocator(Device::cpu(), "pinned host", host_system_memory());
  return *a;  // never destroyed: storages may outlive statics
}

}  // namespace zt::detail
