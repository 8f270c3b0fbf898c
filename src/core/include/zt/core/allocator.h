#pragma once
// Tagged caching allocator: every block carries a MemTag; current and peak bytes are kept per
// tag (exact requested bytes, so tests can compare with DESIGN.md's formulas); freed blocks are
// cached by size class so a steady-state training step allocates nothing new from the system.
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace zt {

enum class MemTag : uint8_t { param, grad, master, optim, activation, comm, workspace };
constexpr size_t kNumMemTags = 7;
const char* mem_tag_name(MemTag t);

struct MemStats {
  std::array<size_t, kNumMemTags> current{};  // bytes in use per tag
  std::array<size_t, kNumMemTags> peak{};     // high-water mark per tag since reset_peaks()
  size_t total_current = 0;
  size_t total_peak = 0;
  size_t cached = 0;          // bytes held in the free-block cache
  size_t system_allocs = 0;   // blocks obtained from the system (cache misses), ever
  size_t alloc_calls = 0;     // allocate() calls, ever
  size_t of(MemTag t) const { return current[size_t(t)]; }
  size_t peak_of(MemTag t) const { return peak[size_t(t)]; }
  std::string breakdown() const;  // "param=1.2MiB grad=... total=..."
};

class Allocator;

// A block of memory owned by the allocator; returns itself to the cache when destroyed.
class Storage {
 public:
  Storage(void* data, size_t bytes, size_t block_bytes, MemTag tag, Allocator* owner)
      : data_(data), bytes_(bytes), block_bytes_(block_bytes), tag_(tag), owner_(owner) {}
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  MemTag tag() const { return tag_; }

 private:
  void* data_;
  size_t bytes_, block_bytes_;
  MemTag tag_;
  Allocator* owner_;
};

class Allocator {
 public:
  static Allocator& global();

  std::shared_ptr<Storage> allocate(size_t bytes, MemTag tag);
  MemStats stats() const;
  void reset_peaks();
  void release_cached();              // hand cached blocks back to the system
  void set_budget(size_t bytes);      // 0 = unlimited; applies to in-use + cached bytes
  size_t budget() const;

 private:
  friend class Storage;
  void release(void* data, size_t bytes, size_t block_bytes, MemTag tag);
  void release_cached_locked();

  mutable std::mutex mu_;
  MemStats stats_;
  size_t budget_ = 0;
  std::unordered_map<size_t, std::vector<void*>> free_;  // size class -> cached blocks
};

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
