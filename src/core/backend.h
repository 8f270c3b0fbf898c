#pragma once
// What a device backend provides to the core: one table per device type (Note [device backend
// table]), filled by the backend's file, as ops' kernel tables are (Note [kernel table]).
#include <cstddef>
#include <memory>

#include "zt/core/allocator.h"

namespace zt::detail {

// Note [device backend table]: as ggml's buffer types, each DeviceType has one DeviceBackend, a
// struct of plain functions filled by its own file: cpu.cpp, sim.cpp (Note [sim device]), meta.cpp
// (Note [meta device]), and cuda.cpp when CUDA is compiled in, else the stub no_cuda.cpp, whose
// entries say "not available in this build" (chosen by which file compiles, never by #ifdef).
// The core asks backend_of(d.type) and calls the entry; backend_of is the one switch over device
// types, so a new device is its enum value, its case there and one file filling the struct.
// A copy between the host and a device is the device's; between two device types it is the later
// type's in the enum (a newer backend knows the older ones): meta's, which stores nothing, moves
// nothing for any pair (a host destination reads zeros); sim's refuses cuda (stage through the
// host). Devices without a copy stream (cpu, meta) leave copy_async and the two event entries
// null: copy_on_copy_stream then copies at once and makes no event.
using EventHandle = std::shared_ptr<void>;  // an event (Note [copy stream]); its last owner releases it

bool only_index_0(int index);       // `available` of the types with one device, index 0 (cpu, sim, meta)
void no_current_device(int index);  // `set_current` where threads have no current device

struct DeviceBackend {
  const char* name;                              // "cpu", "cuda", ...: Device::str's prefix
  bool (*available)(int index) = &only_index_0;  // whether this build and machine can allocate there
  Allocator& (*allocator)(int index);            // throws when the device does not exist or is not available
  void* (*stream)(int index);                    // the compute stream's handle (a cudaStream_t); nullptr: none
  void (*synchronize)(int index);                // waits for everything queued on the compute stream
  // Copies `bytes`, ordered after the work queued on the involved devices' compute streams;
  // returns once a host destination holds the data (a device destination may still be in flight).
  void (*copy)(void* dst, Device dst_dev, const void* src, Device src_dev, size_t bytes);
  void (*memset)(void* dst, int index, int value, size_t bytes);  // on the compute stream
  size_t (*capacity)(int index);                                  // bytes it can hold at most; 0: the host
  void (*set_current)(int index) = &no_current_device;            // this thread's current device
  // The copy (one side on the host) runs on the device's copy stream after the work queued on its
  // compute stream so far; the event is recorded after it (Note [copy stream]).
  EventHandle (*copy_async)(void* dst, Device dst_dev, const void* src, Device src_dev, size_t bytes) = nullptr;
  void (*compute_waits)(int index, const EventHandle& e) = nullptr;  // the compute stream's later work waits
  void (*event_synchronize)(int index, const EventHandle& e) = nullptr;
};

// The table of a backend whose functions are <P>_available, <P>_allocator, ... <P>_event_synchronize:
// cuda.cpp and its stub no_cuda.cpp fill cuda's alike.
#define ZT_DEVICE_BACKEND(NAME, P)                                                                            \
  DeviceBackend {                                                                                             \
    .name = NAME, .available = &P##_available, .allocator = &P##_allocator, .stream = &P##_stream,            \
    .synchronize = &P##_synchronize, .copy = &P##_copy, .memset = &P##_memset, .capacity = &P##_memory_total, \
    .set_current = &P##_set_current, .copy_async = &P##_copy_async, .compute_waits = &P##_compute_waits,      \
    .event_synchronize = &P##_event_synchronize                                                               \
  }

const DeviceBackend& backend_of(DeviceType t);  // device.cpp
const DeviceBackend& cpu_backend();             // cpu.cpp
const DeviceBackend& cuda_backend();            // cuda.cpp or no_cuda.cpp
const DeviceBackend& sim_backend();             // sim.cpp
const DeviceBackend& meta_backend();            // meta.cpp

// The types with one device, index 0 (cpu, sim, meta), check it in their allocator ("there is one
// sim device, index 0").
void check_only_index_0(DeviceType t, int index);

int cuda_device_count();             // 0 without CUDA or without a GPU
Allocator& pinned_host_allocator();  // cudaHostAlloc with CUDA, ordinary host memory without

// The copy and memset of whichever device is involved (one side may be the host).
void device_copy(void* dst, Device dst_dev, const void* src, Device src_dev, size_t bytes);
void device_memset(void* dst, Device d, int value, size_t bytes);

}  // namespace zt::detail
