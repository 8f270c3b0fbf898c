#include "zt/core/device.h"

#include "backend.h"

namespace zt {

const char* device_type_name(DeviceType t) { return t == DeviceType::cuda ? "cuda" : "cpu"; }

std::string Device::str() const {
  if (type == DeviceType::cpu && index == 0) return "cpu";
  return std::string(device_type_name(type)) + ":" + std::to_string(index);
}

std::ostream& operator<<(std::ostream& os, const Device& d) { return os << d.str(); }

bool is_available(Device d) {
  if (d.type == DeviceType::cuda) return detail::cuda_available(d.index);
  return d.index == 0;
}

int cuda_device_count() { return detail::cuda_device_count(); }

void* device_stream(Device d) { return d.is_cpu() ? nullptr : detail::cuda_stream(d.index); }

void synchronize(Device d) {
  if (!d.is_cpu()) detail::cuda_synchronize(d.index);
}

}  // namespace zt
