// The simulated device's core (Note [sim device] in zt/core/sim_device.h): memory in a memfd
// mapped twice (no access for the host's pointers, read-write for kernels), a first-fit range
// allocator under the tagged caching allocator, and its two streams, each a worker queue.
#include <fcntl.h>
#include <linux/falloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "backend.h"
#include "zt/core/error.h"
#include "zt/core/parallel.h"
#include "zt/core/sim_device.h"
#include "zt/core/worker_queue.h"

namespace zt {
namespace {

constexpr size_t kSimAlign = 256;  // as cudaMalloc

size_t capacity_from_env() {
  const char* s = std::getenv("ZT_SIM_MEMORY_MB");
  if (s == nullptr || *s == '\0') return size_t(8192) << 20;
  char* end = nullptr;
  const long long mb = std::strtoll(s, &end, 10);
  ZT_CHECK_AS(ErrorKind::config, *end == '\0' && mb > 0 && mb <= (1ll << 24), "[core] ZT_SIM_MEMORY_MB='", s,
              "' is not a whole number of MiB between 1 and 16777216");
  return size_t(mb) << 20;
}

// ZT_SIM_MUTATE (Note [sim device]): test hooks. drop_sync drops the wait of copies to the host;
// it and `late` start each stream task 2 ms late, so a missing wait shows.
bool mutate_is(const char* mode) {
  const char* s = std::getenv("ZT_SIM_MUTATE");
  return s != nullptr && std::strcmp(s, mode) == 0;
}
bool drop_sync() {
  static const bool on = mutate_is("drop_sync");
  return on;
}
bool late_stream() {
  static const bool on = drop_sync() || mutate_is("late");
  return on;
}
bool drop_copy_wait() {  // Note [copy stream]
  static const bool on = mutate_is("drop_copy_wait");
  return on;
}

// The two views of one memfd and the ranges handed out of it.
class SimMemory {
 public:
  SimMemory() : cap_(capacity_from_env()) {
    fd_ = memfd_create("zerotrain-sim", MFD_CLOEXEC);
    ZT_CHECK_AS(ErrorKind::internal, fd_ >= 0, "[core] sim device: memfd_create failed: ", std::strerror(errno));
    ZT_CHECK_AS(ErrorKind::internal, ftruncate(fd_, off_t(cap_)) == 0, "[core] sim device: ftruncate to ", cap_,
                " bytes failed: ", std::strerror(errno));
    rw_ = static_cast<char*>(mmap(nullptr, cap_, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0));
    dev_ = static_cast<char*>(mmap(nullptr, cap_, PROT_NONE, MAP_SHARED, fd_, 0));
    ZT_CHECK_AS(ErrorKind::internal, rw_ != MAP_FAILED && dev_ != MAP_FAILED, "[core] sim device: mmap of ", cap_,
                " bytes failed: ", std::strerror(errno));
    free_[0] = cap_;
  }

  size_t capacity() const { return cap_; }

  void* rw(const void* p) const {
    const char* c = static_cast<const char*>(p);
    ZT_CHECK_AS(ErrorKind::internal, c >= dev_ && c <= dev_ + cap_, "[core] pointer ", p, " is not sim device memory");
    return rw_ + (c - dev_);
  }

  // First fit; nullptr when no free range is large enough (the caching allocator then throws
  // out_of_memory naming the device, the tag and the sizes).
  void* alloc(size_t bytes) {
    bytes = (bytes + kSimAlign - 1) / kSimAlign * kSimAlign;
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      if (it->second < bytes) continue;
      const size_t off = it->first, left = it->second - bytes;
      free_.erase(it);
      if (left > 0) free_[off + bytes] = left;
      used_[off] = bytes;
      return dev_ + off;
    }
    return nullptr;
  }

  // Gives the pages back (a hole in the memfd) and merges the range with its free neighbours.
  void free(void* p) {
    const size_t off = size_t(static_cast<char*>(p) - dev_);
    std::lock_guard<std::mutex> lock(mu_);
    auto u = used_.find(off);
    if (u == used_.end()) return;
    size_t start = off, size = u->second;
    used_.erase(u);
    (void)fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off_t(start), off_t(size));
    auto next = free_.lower_bound(start);
    if (next != free_.end() && next->first == start + size) {
      size += next->second;
      next = free_.erase(next);
    }
    if (next != free_.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second == start) {
        start = prev->first;
        size += prev->second;
        free_.erase(prev);
      }
    }
    free_[start] = size;
  }

 private:
  size_t cap_;
  int fd_ = -1;
  char *rw_ = nullptr, *dev_ = nullptr;
  std::mutex mu_;
  std::map<size_t, size_t> free_, used_;  // offset -> bytes
};

SimMemory& memory() {
  static SimMemory* m = new SimMemory();  // never destroyed: storages may outlive statics
  return *m;
}

// A stream: work runs on one worker thread in the order it was queued (Note [worker queue]). The
// device has two, its compute stream and its copy stream (Note [copy stream]).
thread_local bool t_on_stream = false;  // this thread runs one of the two streams

class SimStream {
 public:
  void enqueue(std::function<void()> work) { queue_.submit(std::move(work)); }

  void synchronize() {
    if (t_on_stream) return;  // a stream's work never waits for a stream (blocks it frees are its own)
    queue_.wait_idle();
  }

 private:
  static void before_each() {
    if (late_stream()) std::this_thread::sleep_for(std::chrono::milliseconds(2));  // the host runs ahead
    adopt_num_threads();  // set_num_threads may have changed since the last task
  }
  WorkerQueue queue_{[] { t_on_stream = true; }, &before_each};
};

SimStream& stream() {
  static SimStream* s = new SimStream();  // never destroyed: work may be queued at exit
  return *s;
}
SimStream& copy_stream() {
  static SimStream* s = new SimStream();
  return *s;
}

// A point in one stream that the other stream or the host waits for.
class SimEvent {
 public:
  void set() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
  }
  void wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return done_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
};

void* sim_system_alloc(size_t bytes) { return memory().alloc(bytes); }
void sim_system_free(void* p) {
  stream().synchronize();  // queued work may still touch the block (as cudaFree waits)
  copy_stream().synchronize();
  memory().free(p);
}

// Storages of host views own nothing: their release does nothing.
class ViewAllocator final : public Allocator {
 public:
  Device device() const override { return Device::cpu(); }
  const std::string& name() const override { return name_; }
  std::shared_ptr<Storage> allocate(size_t, MemTag) override {
    ZT_THROW_AS(ErrorKind::internal, "[core] the sim host view allocates nothing");
  }
  MemStats stats() const override { return {}; }
  void reset_peaks() override {}
  void release_cached() override {}
  void set_budget(size_t) override {}
  size_t budget() const override { return 0; }

 private:
  void release(void*, size_t, size_t, MemTag) override {}
  std::string name_ = "sim host view";
};

}  // namespace

namespace sim {

void* host_view(const void* device_ptr) { return memory().rw(device_ptr); }

Tensor host_alias(const Tensor& t) {
  if (!t.defined() || !t.has_storage() || t.device().type != DeviceType::sim) return t;
  static ViewAllocator* views = new ViewAllocator();
  const Storage& s = *t.storage();
  auto impl = std::make_shared<TensorImpl>(*t.impl());
  impl->storage = std::make_shared<Storage>(memory().rw(s.data()), s.bytes(), s.bytes(), s.tag(), views);
  impl->device = Device::cpu();
  impl->autograd = nullptr;
  return Tensor(std::move(impl));
}

void enqueue(std::function<void()> work) { stream().enqueue(std::move(work)); }
void synchronize() { stream().synchronize(); }
size_t capacity() { return memory().capacity(); }

}  // namespace sim

namespace detail {
namespace {

Allocator& sim_allocator(int index) {
  check_only_index_0(DeviceType::sim, index);
  static Allocator* a = new CachingAllocator(Device::sim(), "sim:0", {&sim_system_alloc, &sim_system_free});
  return *a;
}

void* sim_stream(int) { return &stream(); }
void sim_synchronize(int) { stream().synchronize(); }
size_t sim_capacity(int) { return memory().capacity(); }

// A device other than sim on either side is refused: its memory is not the memfd's.
void sim_copy(void* dst, Device dst_dev, const void* src, Device src_dev, size_t bytes) {
  if (bytes == 0) return;
  ZT_CHECK(
      (dst_dev.is_cpu() || dst_dev.type == DeviceType::sim) && (src_dev.is_cpu() || src_dev.type == DeviceType::sim),
      "[core] no copy between ", src_dev, " and ", dst_dev, ": stage through the host");
  void* d = dst_dev.is_cpu() ? dst : memory().rw(dst);
  const void* s = src_dev.is_cpu() ? src : memory().rw(src);
  if (dst_dev.is_cpu() && !src_dev.is_cpu() && drop_sync())
    return void(std::memmove(d, s, bytes));  // the mutation: what the device has not written yet
  if (src_dev.is_cpu()) {                    // staged at the call, as CUDA stages pageable memory: no wait
    auto staged = std::make_shared<std::vector<char>>(static_cast<const char*>(s), static_cast<const char*>(s) + bytes);
    return stream().enqueue([d, staged] { std::memcpy(d, staged->data(), staged->size()); });
  }
  stream().enqueue([d, s, bytes] { std::memmove(d, s, bytes); });
  if (dst_dev.is_cpu()) stream().synchronize();  // a host destination is read right after (cudaMemcpy)
}

EventHandle sim_copy_async(void* dst, Device dst_dev, const void* src, Device src_dev, size_t bytes) {
  void* d = dst_dev.is_cpu() ? dst : memory().rw(dst);
  const void* s = src_dev.is_cpu() ? src : memory().rw(src);
  auto queued = std::make_shared<SimEvent>(), landed = std::make_shared<SimEvent>();
  stream().enqueue([queued] { queued->set(); });
  copy_stream().enqueue([queued, landed, d, s, bytes] {
    queued->wait();  // the destination's earlier users (or the source's writers) have run
    if (drop_copy_wait()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    std::memcpy(d, s, bytes);
    landed->set();
  });
  return landed;
}

void sim_compute_waits(int, const EventHandle& e) {
  if (drop_copy_wait()) return;  // the mutation
  auto ev = std::static_pointer_cast<SimEvent>(e);
  stream().enqueue([ev] { ev->wait(); });
}

void sim_event_synchronize(int, const EventHandle& e) { std::static_pointer_cast<SimEvent>(e)->wait(); }

void sim_memset(void* dst, int, int value, size_t bytes) {
  if (bytes == 0) return;
  void* d = memory().rw(dst);
  stream().enqueue([d, value, bytes] { std::memset(d, value, bytes); });
}

}  // namespace

const DeviceBackend& sim_backend() {
  static const DeviceBackend b{.name = "sim",
                               .allocator = &sim_allocator,
                               .stream = &sim_stream,
                               .synchronize = &sim_synchronize,
                               .copy = &sim_copy,
                               .memset = &sim_memset,
                               .capacity = &sim_capacity,
                               .copy_async = &sim_copy_async,
                               .compute_waits = &sim_compute_waits,
                               .event_synchronize = &sim_event_synchronize};
  return b;
}

}  // namespace detail
}  // namespace zt
