#include "zt/core/device.h"

#include <algorithm>

#include "backend.h"
#include "zt/core/device_capacity.h"
#include "zt/core/error.h"

namespace zt {

namespace detail {

// The one switch over device types (Note [device backend table]); -Wswitch names a missing case.
const DeviceBackend& backend_of(DeviceType t) {
  switch (t) {
    case DeviceType::cuda:
      return cuda_backend();
    case DeviceType::sim:
      return sim_backend();
    case DeviceType::meta:
      return meta_backend();
    case DeviceType::cpu:
      break;
  }
  return cpu_backend();
}

void check_only_index_0(DeviceType t, int index) {
  ZT_CHECK(index == 0, "[core] device ", Device{t, index}, " does not exist (there is one ", backend_of(t).name,
           " device, index 0)");
}
bool only_index_0(int index) { return index == 0; }
void no_current_device(int) {}

void device_copy(void* dst, Device dst_dev, const void* src, Device src_dev, size_t bytes) {
  backend_of(std::max(dst_dev.type, src_dev.type)).copy(dst, dst_dev, src, src_dev, bytes);
}

void device_memset(void* dst, Device d, int value, size_t bytes) {
  backend_of(d.type).memset(dst, d.index, value, bytes);
}

}  // namespace detail

const char* device_type_name(DeviceType t) { return detail::backend_of(t).name; }

std::string Device::str() const {
  if (type == DeviceType::cpu && index == 0) return "cpu";
  return std::string(device_type_name(type)) + ":" + std::to_string(index);
}

std::ostream& operator<<(std::ostream& os, const Device& d) { return os << d.str(); }

bool is_available(Device d) { return detail::backend_of(d.type).available(d.index); }

int cuda_device_count() { return detail::cuda_device_count(); }

size_t device_capacity(Device d) { return detail::backend_of(d.type).capacity(d.index); }

void* device_stream(Device d) { return detail::backend_of(d.type).stream(d.index); }

void synchronize(Device d) { detail::backend_of(d.type).synchronize(d.index); }

}  // namespace zt
