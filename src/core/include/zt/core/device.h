#pragma once
// Where a Storage lives. Pinned host memory is a cpu device (as in PyTorch): pinning is a
// property of the allocator that made the block, not a device of its own.
#include <cstdint>
#include <ostream>
#include <string>

namespace zt {

enum class DeviceType : uint8_t { cpu, cuda };
const char* device_type_name(DeviceType t);

struct Device {
  DeviceType type = DeviceType::cpu;
  int index = 0;  // always 0 for cpu

  static Device cpu() { return {DeviceType::cpu, 0}; }
  static Device cuda(int index = 0) { return {DeviceType::cuda, index}; }
  bool is_cpu() const { return type == DeviceType::cpu; }
  std::string str() const;  // "cpu", "cuda:0"
  friend bool operator==(const Device&, const Device&) = default;
};

std::ostream& operator<<(std::ostream& os, const Device& d);

// Whether this build can allocate on `d` (cuda: only when the CUDA backend is compiled in).
bool is_available(Device d);

}  // namespace zt
