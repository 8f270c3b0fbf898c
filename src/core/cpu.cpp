// The host's entry of the device backend table (Note [device backend table]): one device, cpu,
// with no stream and no copy stream; its memory is the process's heap.
#include <cstring>

#include "backend.h"

namespace zt::detail {
namespace {

Allocator& cpu_allocator(int index) {
  check_only_index_0(DeviceType::cpu, index);
  static Allocator* a = new CachingAllocator(Device::cpu(), "cpu", host_system_memory());
  return *a;  // never destroyed: storages may outlive statics
}

void* cpu_stream(int) { return nullptr; }
void cpu_synchronize(int) {}
size_t cpu_capacity(int) { return 0; }  // the host's memory caps no device plan

void cpu_copy(void* dst, Device, const void* src, Device, size_t bytes) {
  if (bytes > 0) std::memmove(dst, src, bytes);
}
void cpu_memset(void* dst, int, int value, size_t bytes) {
  if (bytes > 0) std::memset(dst, value, bytes);
}

}  // namespace

const DeviceBackend& cpu_backend() {
  static const DeviceBackend b{.name = "cpu",
                               .allocator = &cpu_allocator,
                               .stream = &cpu_stream,
                               .synchronize = &cpu_synchronize,
                               .copy = &cpu_copy,
                               .memset = &cpu_memset,
                               .capacity = &cpu_capacity};
  return b;
}

}  // namespace zt::detail
