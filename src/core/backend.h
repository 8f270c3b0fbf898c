#pragma once
// What a device backend provides to the core. Which file defines these is chosen at build time:
// cuda.cpp when CUDA is compiled in, no_cuda.cpp otherwise (see docs/design.md, "Layers").
#include <cstddef>
#include <memory>

#include "zt/core/allocator.h"

namespace zt::detail {

int cuda_device_count();  // 0 without CUDA or without a GPU
bool cuda_available(int index);
Allocator& cuda_allocator(int index);  // throws when the device is not available
Allocator& pinned_host_allocator();    // cudaHostAlloc with CUDA, ordinary host memory without
void* cuda_stream(int index);          // the device's compute stream (a cudaStream_t)
void cuda_synchronize(int index);      // waits for everything queued on the compute stream
// Copies `bytes` between host and device memory or within/between devices, ordered after the
// work queued on the involved devices' compute streams; returns once a host destination holds
// the data (a device destination may still be in flight on its stream).
void cuda_copy(void* dst, Device dst_dev, const void* src, Device src_dev, size_t bytes);
void cuda_memset(void* dst, int index, int value, size_t bytes);  // on the compute stream
size_t cuda_memory_total(int index);                              // the GPU's memory in bytes (cudaMemGetInfo's total)

// The simulated device (sim.cpp, always built; Note [sim device]): the same four, for sim:0.
Allocator& sim_allocator();
void* sim_stream();
void sim_synchronize();
void sim_copy(void* dst, Device dst_dev, const void* src, Device src_dev, size_t bytes);
void sim_memset(void* dst, int value, size_t bytes);

// The meta device (meta.cpp; Note [meta device]): an allocator of addresses that are never memory,
// and its copy (a host destination reads zeros; anything else moves nothing).
Allocator& meta_allocator();
void meta_copy(void* dst, Device dst_dev, size_t bytes);
inline constexpr size_t kMetaCapacity = size_t(1) << 62;  // the dry run never runs out

// Note [copy stream] (zt/core/copy_stream.h): an event is a shared handle whose last owner
// releases it. The copy (host to device or back) runs on the device's copy stream after the work
// queued on its compute stream so far; the event is recorded after it.
using EventHandle = std::shared_ptr<void>;
EventHandle cuda_copy_async(void* dst, const void* src, size_t bytes, int index);
void cuda_compute_waits(int index, const EventHandle& e);  // the compute stream's later work waits
void cuda_event_synchronize(int index, const EventHandle& e);
void cuda_set_current(int index);  // this thread's current device
EventHandle sim_copy_async(void* dst, Device dst_dev, const void* src, Device src_dev, size_t bytes);
void sim_compute_waits(const EventHandle& e);
void sim_event_synchronize(const EventHandle& e);

// The copy and memset of whichever device is involved (cuda or sim; one side may be the host).
void device_copy(void* dst, Device dst_dev, const void* src, Device src_dev, size_t bytes);
void device_memset(void* dst, Device d, int value, size_t bytes);

}  // namespace zt::detail
