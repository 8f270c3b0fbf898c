#include "zt/core/allocator.h"

#include <tuple>

#include <cstdio>
#include <cstdlib>

#include "backend.h"
#include "zt/core/error.h"

namespace zt {

namespace {
constexpr size_t kAlign = 64;
thread_local MemTag t_current_tag = MemTag::activation;

// Size classes: 64-byte steps below 1 MiB, 64 KiB steps above, so reuse stays exact-fit cheap.
size_t size_class(size_t bytes) {
  if (bytes == 0) bytes = 1;
  size_t step = bytes < (1u << 20) ? kAlign : (64u << 10);
  ZT_CHECK_AS(ErrorKind::out_of_memory, bytes <= SIZE_MAX - step, "[memory] cannot allocate ", bytes,
              " bytes (more than any machine has)");
  return (bytes + step - 1) / step * step;
}
}  // namespace

const char* mem_tag_name(MemTag t) {
  static const char* names[] = {"param", "grad", "master", "optim", "activation", "comm", "workspace"};
  return names[size_t(t)];
}

std::string format_bytes(size_t b) {
  char buf[32];
  if (b >= (1ull << 30))
    std::snprintf(buf, sizeof buf, "%.2fGiB", double(b) / (1ull << 30));
  else if (b >= (1u << 20))
    std::snprintf(buf, sizeof buf, "%.2fMiB", double(b) / (1u << 20));
  else if (b >= 1024)
    std::snprintf(buf, sizeof buf, "%.1fKiB", double(b) / 1024);
  else
    std::snprintf(buf, sizeof buf, "%zuB", b);
  return buf;
}

std::string MemStats::breakdown() const {
  std::string s;
  for (size_t i = 0; i < kNumMemTags; ++i) {
    if (current[i] == 0) continue;
    s += mem_tag_name(MemTag(i));
    s += '=';
    s += format_bytes(current[i]);
    s += ' ';
  }
  s += "cached=";
  s += format_bytes(cached);
  s += " total=";
  s += format_bytes(total_current);
  return s;
}

Storage::Storage(void* data, size_t bytes, size_t block_bytes, MemTag tag, Allocator* owner)
    : data_(data), bytes_(bytes), block_bytes_(block_bytes), tag_(tag), device_(owner->device()), owner_(owner) {}

Storage::~Storage() { owner_->release(data_, bytes_, block_bytes_, tag_); }

SystemMemory host_system_memory() {
  return {[](size_t bytes) { return std::aligned_alloc(kAlign, bytes); }, [](void* p) { std::free(p); }};
}

Allocator& Allocator::global() { return allocator_for(Device::cpu()); }

Allocator& allocator_for(Device device) { return detail::backend_of(device.type).allocator(device.index); }

Allocator& pinned_host_allocator() { return detail::pinned_host_allocator(); }

bool is_pinned(const Storage& s) { return &s.allocator() == &pinned_host_allocator(); }

CachingAllocator::CachingAllocator(Device device, std::string name, SystemMemory sys)
    : device_(device), name_(std::move(name)), sys_(sys) {}

CachingAllocator::~CachingAllocator() { release_cached_locked(); }

std::shared_ptr<Storage> CachingAllocator::allocate(size_t bytes, MemTag tag) {
  const size_t cls = size_class(bytes);
  void* p = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.alloc_calls;
    auto it = free_.find(cls);
    if (it != free_.end() && !it->second.empty()) {
      MemTag last;
      std::tie(p, last) = it->second.back();
      it->second.pop_back();
      stats_.cached -= cls;
      stats_.cached_by[size_t(last)] -= cls;
    } else {
      if (budget_ && stats_.total_current + stats_.cached + cls > budget_) release_cached_locked();
      if (budget_ && stats_.total_current + cls > budget_) {
        ZT_THROW_AS(ErrorKind::out_of_memory, "[memory] out of budget: allocating ", format_bytes(bytes), " as '",
                    mem_tag_name(tag), "' would exceed the ", where(), "budget of ", format_bytes(budget_),
                    " (in use: ", stats_.breakdown(),
                    "); try a higher zero_optimization.stage, offload, or a smaller micro-batch");
      }
      p = sys_.alloc(cls);
      if (!p && stats_.cached > 0) {  // blocks of other sizes may hold what the system lacks (a GPU)
        release_cached_locked();
        p = sys_.alloc(cls);
      }
      ZT_CHECK_AS(ErrorKind::out_of_memory, p, "[memory] the system refused ", format_bytes(cls), " of ", name_,
                  " memory for '", mem_tag_name(tag), "'");
      ++stats_.system_allocs;
    }
    size_t& cur = stats_.current[size_t(tag)];
    cur += bytes;
    if (cur > stats_.peak[size_t(tag)]) stats_.peak[size_t(tag)] = cur;
    note_resident(tag);
    stats_.total_current += bytes;
    if (stats_.total_current > stats_.total_peak) stats_.total_peak = stats_.total_current;
  }
  return std::make_shared<Storage>(p, bytes, cls, tag, this);
}

std::string CachingAllocator::where() const { return name_ == "cpu" ? "" : name_ + " "; }

void CachingAllocator::release(void* data, size_t bytes, size_t block_bytes, MemTag tag) {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.current[size_t(tag)] -= bytes;
  stats_.total_current -= bytes;
  free_[block_bytes].emplace_back(data, tag);
  stats_.cached += block_bytes;
  stats_.cached_by[size_t(tag)] += block_bytes;
  note_resident(tag);
}

void CachingAllocator::note_resident(MemTag tag) {
  const size_t t = size_t(tag), r = stats_.current[t] + stats_.cached_by[t];
  if (r > stats_.resident_peak[t]) stats_.resident_peak[t] = r;
}

MemStats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void CachingAllocator::reset_peaks() {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.peak = stats_.current;
  stats_.total_peak = stats_.total_current;
  for (size_t t = 0; t < kNumMemTags; ++t) stats_.resident_peak[t] = stats_.current[t] + stats_.cached_by[t];
}

void CachingAllocator::release_cached() {
  std::lock_guard<std::mutex> lock(mu_);
  release_cached_locked();
}

void CachingAllocator::release_cached_locked() {
  for (auto& [cls, blocks] : free_) {
    for (auto& [p, tag] : blocks) {
      sys_.free(p);
      stats_.cached_by[size_t(tag)] -= cls;
    }
    stats_.cached -= cls * blocks.size();
    blocks.clear();
  }
}

void CachingAllocator::set_budget(size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  budget_ = bytes;
}

size_t CachingAllocator::budget() const {
  std::lock_guard<std::mutex> lock(mu_);
  return budget_;
}

TagScope::TagScope(MemTag tag) : prev_(t_current_tag) { t_current_tag = tag; }
TagScope::~TagScope() { t_current_tag = prev_; }
MemTag current_tag() { return t_current_tag; }

}  // namespace zt
