// The CUDA backend of the core, its entry of the device backend table (Note [device backend
// table]): a caching allocator per GPU over cudaMalloc, pinned host memory over cudaHostAlloc,
// one compute stream per GPU (Note [device streams]) and a copy stream (Note [copy stream]), copies.
#include <cuda_runtime.h>

#include <array>
#include <atomic>
#include <cstring>
#include <mutex>
#include <utility>

#include "backend.h"
#include "zt/core/error.h"

namespace zt::detail {
namespace {

constexpr int kMaxDevices = 16;  // per process; SystemMemory needs one function pair per index

// Every CUDA error becomes a zt::Error; `device` < 0 means host-side calls (pinned memory).
void check(cudaError_t e, const char* call, int device) {
  if (e == cudaSuccess) return;
  cudaGetLastError();  // clear a non-sticky error so the next call does not report it again
  const ErrorKind kind = e == cudaErrorMemoryAllocation ? ErrorKind::out_of_memory : ErrorKind::internal;
  ZT_THROW_AS(kind, "[cuda] ", call, ": ", cudaGetErrorString(e), " (",
              device < 0 ? std::string("host") : Device::cuda(device).str(), ")");
}

// Makes `index` the current device for a scope and restores the caller's afterwards.
class DeviceGuard {
 public:
  explicit DeviceGuard(int index) : index_(index) {
    check(cudaGetDevice(&prev_), "cudaGetDevice", index);
    if (prev_ != index_) check(cudaSetDevice(index_), "cudaSetDevice", index);
  }
  ~DeviceGuard() {
    if (prev_ != index_) cudaSetDevice(prev_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int index_, prev_ = 0;
};

// SystemMemory holds plain function pointers, so each device index gets its own pair.
// Out of memory answers nullptr (the allocator throws out_of_memory); other errors throw.
template <int I>
void* device_alloc(size_t bytes) {
  DeviceGuard guard(I);
  void* p = nullptr;
  const cudaError_t e = cudaMalloc(&p, bytes);
  if (e == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    return nullptr;
  }
  check(e, "cudaMalloc", I);
  return p;
}

// Called from Storage destructors and at exit, so it never throws: after the runtime has
// unloaded (cudaErrorCudartUnloading) the driver frees everything anyway.
template <int I>
void device_free(void* p) {
  int prev = 0;
  if (cudaGetDevice(&prev) != cudaSuccess) prev = I;
  if (prev != I) cudaSetDevice(I);
  if (cudaFree(p) != cudaSuccess) cudaGetLastError();
  if (prev != I) cudaSetDevice(prev);
}

template <int... I>
constexpr std::array<SystemMemory, sizeof...(I)> system_table(std::integer_sequence<int, I...>) {
  return {SystemMemory{&device_alloc<I>, &device_free<I>}...};
}
constexpr auto kDeviceMemory = system_table(std::make_integer_sequence<int, kMaxDevices>{});

void* pinned_alloc(size_t bytes) {
  void* p = nullptr;
  if (cudaHostAlloc(&p, bytes, cudaHostAllocDefault) != cudaSuccess) {
    cudaGetLastError();
    return nullptr;  // the allocator throws out_of_memory naming "pinned host"
  }
  return p;
}

void pinned_free(void* p) {
  if (cudaFreeHost(p) != cudaSuccess) cudaGetLastError();  // never throws (see device_free)
}

void check_device(int index) {
  const int n = cuda_device_count();
  ZT_CHECK(index >= 0 && index < n, "[core] device ", Device::cuda(index), " is not available (this process sees ", n,
           n == 1 ? " GPU)" : " GPUs)");
  ZT_CHECK(index < kMaxDevices, "[core] device ", Device::cuda(index), " is beyond the ", kMaxDevices,
           " GPUs per process this build supports");
}

// Lazily made per-device objects, never destroyed (storages and streams may outlive statics).
std::mutex g_mu;
std::array<std::atomic<Allocator*>, kMaxDevices> g_allocators{};
std::array<std::atomic<cudaStream_t>, kMaxDevices> g_streams{}, g_copy_streams{};

cudaStream_t stream_in(std::array<std::atomic<cudaStream_t>, kMaxDevices>& table, int index) {
  check_device(index);
  cudaStream_t s = table[index].load(std::memory_order_acquire);
  if (s) return s;
  std::lock_guard<std::mutex> lock(g_mu);
  s = table[index].load(std::memory_order_relaxed);
  if (!s) {
    DeviceGuard guard(index);
    // Non-blocking: never implicitly ordered with the legacy default stream (which we never use).
    check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags", index);
    table[index].store(s, std::memory_order_release);
  }
  return s;
}
cudaStream_t stream_of(int index) { return stream_in(g_streams, index); }
cudaStream_t copy_stream_of(int index) { return stream_in(g_copy_streams, index); }  // Note [copy stream]

// An event recorded on `s` now, released when its last handle goes (cudaEventDestroy of a pending
// event is allowed: the runtime frees it once it completes). A host that waits for it sleeps
// (blocking sync) rather than spinning on a core the host's own work needs.
EventHandle record_on(cudaStream_t s, int index) {
  DeviceGuard guard(index);
  cudaEvent_t ev = nullptr;
  check(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming | cudaEventBlockingSync), "cudaEventCreateWithFlags",
        index);
  const cudaError_t e = cudaEventRecord(ev, s);
  if (e != cudaSuccess) cudaEventDestroy(ev);
  check(e, "cudaEventRecord", index);
  return EventHandle(static_cast<void*>(ev), [](void* p) { cudaEventDestroy(static_cast<cudaEvent_t>(p)); });
}

}  // namespace

int cuda_device_count() {
  static const int n = [] {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {  // no driver, or no GPU: a CPU-only run
      cudaGetLastError();
      return 0;
    }
    return count;
  }();
  return n;
}

namespace {

bool cuda_available(int index) { return index >= 0 && index < cuda_device_count() && index < kMaxDevices; }

Allocator& cuda_allocator(int index) {
  check_device(index);
  Allocator* a = g_allocators[index].load(std::memory_order_acquire);
  if (a) return *a;
  std::lock_guard<std::mutex> lock(g_mu);
  a = g_allocators[index].load(std::memory_order_relaxed);
  if (!a) {
    a = new CachingAllocator(Device::cuda(index), Device::cuda(index).str(), kDeviceMemory[size_t(index)]);
    g_allocators[index].store(a, std::memory_order_release);
  }
  return *a;
}

void* cuda_stream(int index) { return stream_of(index); }

void cuda_synchronize(int index) {
  cudaStream_t s = stream_of(index);
  DeviceGuard guard(index);
  check(cudaStreamSynchronize(s), "cudaStreamSynchronize", index);
}

// On the compute stream of the device involved (the destination's when it is a GPU), so the copy
// follows the work queued there. The host waits when it must: a host destination is read right
// after, a host source may be freed right after, and a copy between two GPUs also follows the
// source's stream and is waited for (the source block could otherwise be reused too early).
// Page-locked (cudaHostAlloc'd or registered) host memory, which the copy engine reads after the
// call returns; ordinary memory is unregistered.
bool pinned(const void* p) {
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    (void)cudaGetLastError();  // clear it: an unknown pointer is ordinary memory
    return false;
  }
  return a.type == cudaMemoryTypeHost;
}

void cuda_copy(void* dst, Device dst_dev, const void* src, Device src_dev, size_t bytes) {
  if (bytes == 0) return;
  if (dst_dev.is_cpu() && src_dev.is_cpu()) {
    std::memmove(dst, src, bytes);
    return;
  }
  const int index = dst_dev.is_cpu() ? src_dev.index : dst_dev.index;
  cudaStream_t s = stream_of(index);
  DeviceGuard guard(index);
  const bool across = !dst_dev.is_cpu() && !src_dev.is_cpu() && dst_dev.index != src_dev.index;
  if (across) {
    const EventHandle ev = record_on(stream_of(src_dev.index), src_dev.index);
    check(cudaStreamWaitEvent(s, static_cast<cudaEvent_t>(ev.get()), 0), "cudaStreamWaitEvent", index);
  }
  check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s), "cudaMemcpyAsync", index);
  // A host destination is read right after, and a pinned host source may be reused: wait. A
  // pageable source is staged by the driver before cudaMemcpyAsync returns, so its upload runs
  // on in stream order while the host goes on (Note [device copies]).
  if (dst_dev.is_cpu() || across || (src_dev.is_cpu() && pinned(src)))
    check(cudaStreamSynchronize(s), "cudaStreamSynchronize", index);
}

EventHandle cuda_copy_async(void* dst, Device dst_dev, const void* src, Device src_dev, size_t bytes) {
  const int index = dst_dev.is_cpu() ? src_dev.index : dst_dev.index;
  cudaStream_t copy = copy_stream_of(index);
  const EventHandle queued = record_on(stream_of(index), index);
  DeviceGuard guard(index);
  check(cudaStreamWaitEvent(copy, static_cast<cudaEvent_t>(queued.get()), 0), "cudaStreamWaitEvent", index);
  check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, copy), "cudaMemcpyAsync", index);
  return record_on(copy, index);
}

void cuda_compute_waits(int index, const EventHandle& e) {
  cudaStream_t s = stream_of(index);
  DeviceGuard guard(index);
  check(cudaStreamWaitEvent(s, static_cast<cudaEvent_t>(e.get()), 0), "cudaStreamWaitEvent", index);
}

void cuda_set_current(int index) { check(cudaSetDevice(index), "cudaSetDevice", index); }

void cuda_event_synchronize(int index, const EventHandle& e) {
  DeviceGuard guard(index);
  check(cudaEventSynchronize(static_cast<cudaEvent_t>(e.get())), "cudaEventSynchronize", index);
}

void cuda_memset(void* dst, int index, int value, size_t bytes) {
  if (bytes == 0) return;
  cudaStream_t s = stream_of(index);
  DeviceGuard guard(index);
  check(cudaMemsetAsync(dst, value, bytes, s), "cudaMemsetAsync", index);
}

size_t cuda_memory_total(int index) {
  check_device(index);
  DeviceGuard guard(index);
  size_t free = 0, total = 0;
  check(cudaMemGetInfo(&free, &total), "cudaMemGetInfo", index);
  return total;
}

}  // namespace

const DeviceBackend& cuda_backend() {
  static const DeviceBackend b = ZT_DEVICE_BACKEND("cuda", cuda);
  return b;
}

// Without a visible GPU (a CUDA build on a CPU-only machine) cudaHostAlloc cannot work, so pinned
// memory is ordinary host memory, as in no_cuda.cpp: offload still runs and is measured the same.
Allocator& pinned_host_allocator() {
  static Allocator* a =
      new CachingAllocator(Device::cpu(), "pinned host",
                           cuda_device_count() > 0 ? SystemMemory{&pinned_alloc, &pinned_free} : host_system_memory());
  return *a;  // never destroyed: storages may outlive statics
}

}  // namespace zt::detail
