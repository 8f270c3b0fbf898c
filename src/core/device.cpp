#include "zt/core/device.h"

#include "zt/core/device_capacity.h"

#include "backend.h"
#include "zt/core/sim_device.h"

namespace zt {

const char* device_type_name(DeviceType t) {
  switch (t) {
    case DeviceType::cuda:
      return "cuda";
    case DeviceType::sim:
      return "sim";
    case DeviceType::meta:
      return "meta";
    case DeviceType::cpu:
      break;
  }
  return "cpu";
}

std::string Device::str() const {
  if (type == DeviceType::cpu && index == 0) return "cpu";
  return std::string(device_type_name(type)) + ":" + std::to_string(index);
}

std::ostream& operator<<(std::ostream& os, const Device& d) { return os << d.str(); }

bool is_available(Device d) {
  if (d.type == DeviceType::cuda) return detail::cuda_available(d.index);
  return d.index == 0;
}

namespace detail {

void device_copy(void* dst, Device dst_dev, const void* src, Device src_dev, size_t bytes) {
  if (dst_dev.type == DeviceType::meta || src_dev.type == DeviceType::meta)
    meta_copy(dst, dst_dev, bytes);
  else if (dst_dev.type == DeviceType::sim || src_dev.type == DeviceType::sim)
    sim_copy(dst, dst_dev, src, src_dev, bytes);
  else
    cuda_copy(dst, dst_dev, src, src_dev, bytes);
}

void device_memset(void* dst, Device d, int value, size_t bytes) {
  if (d.type == DeviceType::meta) return;  // nothing is stored there
  if (d.type == DeviceType::sim)
    sim_memset(dst, value, bytes);
  else
    cuda_memset(dst, d.index, value, bytes);
}

}  // namespace detail

int cuda_device_count() { return detail::cuda_device_count(); }

size_t device_capacity(Device d) {
  if (d.type == DeviceType::sim) return sim::capacity();
  if (d.type == DeviceType::meta) return detail::kMetaCapacity;
  return d.is_cpu() ? 0 : detail::cuda_memory_total(d.index);
}

void* device_stream(Device d) {
  if (d.type == DeviceType::sim) return detail::sim_stream();
  return d.is_cpu() || d.type == DeviceType::meta ? nullptr : detail::cuda_stream(d.index);
}

void synchronize(Device d) {
  if (d.type == DeviceType::sim)
    detail::sim_synchronize();
  else if (!d.is_cpu() && d.type != DeviceType::meta)
    detail::cuda_synchronize(d.index);
}

}  // namespace zt
