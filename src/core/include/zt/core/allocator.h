#pragma once
// Tagged caching allocators, one per device: every block carries a MemTag; current and peak
// bytes are kept per tag (exact requested bytes, so tests can compare with docs/design.md's
// formulas); freed blocks are cached by size class so a steady-state training step allocates
// nothing new from the system.
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "zt/core/device.h"

namespace zt {

enum class MemTag : uint8_t { param, grad, master, optim, activation, comm, workspace };
constexpr size_t kNumMemTags = 7;
const char* mem_tag_name(MemTag t);

struct MemStats {
  std::array<size_t, kNumMemTags> current{};  // bytes in use per tag
  std::array<size_t, kNumMemTags> peak{};     // high-water mark per tag since reset_peaks()
  size_t total_current = 0;
  size_t total_peak = 0;
  size_t cached = 0;         // bytes held in the free-block cache
  // Per tag: cached blocks it freed last, and the peak of its bytes in use plus those: what the tag
  // keeps resident through the cache (Note [measured activations] in apps).
  std::array<size_t, kNumMemTags> cached_by{};
  std::array<size_t, kNumMemTags> resident_peak{};
  size_t system_allocs = 0;  // blocks obtained from the system (cache misses), ever
  size_t alloc_calls = 0;    // allocate() calls, ever
  size_t of(MemTag t) const { return current[size_t(t)]; }
  size_t peak_of(MemTag t) const { return peak[size_t(t)]; }
  std::string breakdown() const;  // "param=1.2MiB grad=... total=..."
};

class Allocator;

// A block of memory owned by an allocator; returns itself to that allocator when destroyed.
class Storage {
 public:
  Storage(void* data, size_t bytes, size_t block_bytes, MemTag tag, Allocator* owner);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  MemTag tag() const { return tag_; }
  Device device() const { return device_; }
  const Allocator& allocator() const { return *owner_; }  // e.g. to ask whether it is pinned

 private:
  void* data_;
  size_t bytes_, block_bytes_;
  MemTag tag_;
  Device device_;
  Allocator* owner_;
};

// One allocator per device, plus one for pinned host memory; all keep the same per-tag
// accounting and budget. Storages call release() on the allocator that made them.
class Allocator {
 public:
  virtual ~Allocator() = default;
  static Allocator& global();  // the cpu allocator, same as allocator_for(Device::cpu())

  virtual Device device() const = 0;
  virtual const std::string& name() const = 0;  // "cpu", "pinned host", "cuda:0"
  // Throws ErrorKind::out_of_memory over budget or when the system refuses.
  virtual std::shared_ptr<Storage> allocate(size_t bytes, MemTag tag) = 0;
  virtual MemStats stats() const = 0;
  virtual void reset_peaks() = 0;
  virtual void release_cached() = 0;          // hand cached blocks back to the system
  virtual void set_budget(size_t bytes) = 0;  // 0 = unlimited; applies to in-use + cached bytes
  virtual size_t budget() const = 0;

 protected:
  friend class Storage;
  virtual void release(void* data, size_t bytes, size_t block_bytes, MemTag tag) = 0;
};

// Where a caching allocator gets and returns whole blocks (aligned_alloc, cudaMalloc, ...).
struct SystemMemory {
  void* (*alloc)(size_t bytes);  // nullptr when refused; `bytes` is a multiple of 64
  void (*free)(void* p);
};
SystemMemory host_system_memory();  // 64-byte aligned_alloc / free

// The tagged caching allocator over any SystemMemory (one instance per device).
class CachingAllocator final : public Allocator {
 public:
  CachingAllocator(Device device, std::string name, SystemMemory sys);
  ~CachingAllocator() override;

  Device device() const override { return device_; }
  const std::string& name() const override { return name_; }
  std::shared_ptr<Storage> allocate(size_t bytes, MemTag tag) override;
  MemStats stats() const override;
  void reset_peaks() override;
  void release_cached() override;
  void set_budget(size_t bytes) override;
  size_t budget() const override;

 private:
  void release(void* data, size_t bytes, size_t block_bytes, MemTag tag) override;
  void release_cached_locked();
  std::string where() const;  // "" for cpu (its messages predate devices), else "<name> "

  const Device device_;
  const std::string name_;
  const SystemMemory sys_;
  mutable std::mutex mu_;
  MemStats stats_;
  size_t budget_ = 0;
  void note_resident(MemTag tag);  // resident_peak of tag after a change (mu_ held)
  std::unordered_map<size_t, std::vector<std::pair<void*, MemTag>>> free_;  // size class -> cached blocks, their last tag
};

// The allocator of `device`; throws ErrorKind::invalid_argument for a device this build
// lacks ("[core] device cuda:0 is not available in this build").
Allocator& allocator_for(Device device);
// Page-locked host memory for fast device copies; on a CPU-only build, ordinary host memory
// with its own stats and budget.
Allocator& pinned_host_allocator();
bool is_pinned(const Storage& s);

// Tag given to tensors created by ops while this scope is alive (default: activation).
class TagScope {
 public:
  explicit TagScope(MemTag tag);
  ~TagScope();
  TagScope(const TagScope&) = delete;
  TagScope& operator=(const TagScope&) = delete;

 private:
  MemTag prev_;
};
MemTag current_tag();

std::string format_bytes(size_t bytes);

}  // namespace zt
