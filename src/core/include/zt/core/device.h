#pragma once
// Where a Storage lives. Pinned host memory is a cpu device (as in PyTorch): pinning is a
// property of the allocator that made the block, not a device of its own. `sim` is a simulated
// GPU (Note [sim device] in zt/core/sim_device.h): memory the host cannot read, its own stream.
// `meta` only counts (Note [meta device]): its allocator hands out address space no one touches,
// its kernels do nothing, a copy from it reads zeros; a dry run there measures what a run holds.
#include <cstdint>
#include <ostream>
#include <string>

namespace zt {

enum class DeviceType : uint8_t { cpu, cuda, sim, meta };
const char* device_type_name(DeviceType t);

struct Device {
  DeviceType type = DeviceType::cpu;
  int index = 0;  // always 0 for cpu

  static Device cpu() { return {DeviceType::cpu, 0}; }
  static Device cuda(int index = 0) { return {DeviceType::cuda, index}; }
  static Device sim() { return {DeviceType::sim, 0}; }
  static Device meta() { return {DeviceType::meta, 0}; }
  bool is_cpu() const { return type == DeviceType::cpu; }
  std::string str() const;  // "cpu", "cuda:0"
  friend bool operator==(const Device&, const Device&) = default;
};

std::ostream& operator<<(std::ostream& os, const Device& d);

// Whether this build can allocate on `d` (cuda: only when the CUDA backend is compiled in and
// the GPU is present; sim:0 always).
bool is_available(Device d);
int cuda_device_count();  // GPUs this process sees; 0 in a build without CUDA

// Note [device streams]: each GPU has one compute stream that every op on it is enqueued on, in
// program order, so a tensor's producer and consumer need no synchronisation between them; the
// host waits only where it reads a result (to_vector, item, a reduction's value). cpu: nullptr.
void* device_stream(Device d);  // a cudaStream_t for cuda devices, the sim stream's handle for sim
void synchronize(Device d);     // waits for d's queued work (no-op for cpu)

}  // namespace zt
