// Note [meta device]: a device that only counts, for a dry run that measures what a step holds
// (ggml-alloc's measure-then-plan, torchtitan's fake tensors). Its allocator is the caching
// allocator, with the same size classes, tags and peaks, over addresses that are never memory:
// blocks are handed out from the non-canonical half of x86-64's address space, so nothing is
// reserved (a model of petabytes is planned as one of megabytes) and a host access faults at once
// rather than reading stale bytes. Its kernels (ops/meta/table.cpp) do nothing; a copy from it
// gives the host zeros, so host logic that reads a value (a loss, token ids, a norm) sees zeros
// and goes on.
#include <atomic>
#include <cstdint>
#include <cstring>

#include "backend.h"

namespace zt::detail {

namespace {

// Non-canonical on x86-64 (bits 63..47 differ), and 2^62 bytes of room before any wrap.
constexpr uintptr_t kMetaBase = uintptr_t(1) << 63, kMetaEnd = kMetaBase + (uintptr_t(1) << 62);
std::atomic<uintptr_t> g_next{kMetaBase};

// A request past what is left is refused and moves nothing (later dry runs still get room).
void* take(size_t bytes) {
  if (bytes > kMetaEnd - kMetaBase) return nullptr;
  const uintptr_t n = (uintptr_t(bytes) + 4095) & ~uintptr_t(4095);
  uintptr_t p = g_next.load();
  do {
    if (n > kMetaEnd - p) return nullptr;
  } while (!g_next.compare_exchange_weak(p, p + n));
  return reinterpret_cast<void*>(p);
}

void give_back(void*) {}  // addresses are never reused: there is room for 2^62 bytes of blocks

Allocator& meta_allocator(int index) {
  check_only_index_0(DeviceType::meta, index);
  static Allocator* a = new CachingAllocator(Device::meta(), "meta", SystemMemory{take, give_back});
  return *a;  // never destroyed: storages may outlive statics
}

void* meta_stream(int) { return nullptr; }
void meta_synchronize(int) {}                          // nothing is ever queued
size_t meta_capacity(int) { return size_t(1) << 62; }  // the dry run never runs out

// A host destination reads zeros; anything else moves nothing (Note [device backend table]).
void meta_copy(void* dst, Device dst_dev, const void*, Device, size_t bytes) {
  if (dst_dev.is_cpu()) std::memset(dst, 0, bytes);
}
void meta_memset(void*, int, int, size_t) {}  // nothing is stored there

}  // namespace

const DeviceBackend& meta_backend() {
  static const DeviceBackend b{.name = "meta",
                               .allocator = &meta_allocator,
                               .stream = &meta_stream,
                               .synchronize = &meta_synchronize,
                               .copy = &meta_copy,
                               .memset = &meta_memset,
                               .capacity = &meta_capacity};
  return b;
}

}  // namespace zt::detail
