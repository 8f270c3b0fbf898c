#pragma once
// Note [host update overlap]: one host thread that runs ZeRO-Offload's updates in the order they
// are queued, while the caller's thread goes on queuing backward's device work. The caller waits
// for a job by its ticket; a job's exception is rethrown there (and the rest still run).
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

namespace zt::zero {

class HostWorker {
 public:
  // `init` runs first on the thread (e.g. binding it to the device whose copies it waits for).
  explicit HostWorker(std::function<void()> init = nullptr);
  ~HostWorker();  // runs what is queued, then joins
  HostWorker(const HostWorker&) = delete;
  HostWorker& operator=(const HostWorker&) = delete;

  int64_t submit(std::function<void()> job);  // its ticket: 1, 2, ...
  // Blocks until job `ticket` (and every one before it) has run; rethrows the first error any job
  // has raised (possibly a later one) that was not rethrown yet.
  void wait(int64_t ticket);

 private:
  void loop(const std::function<void()>& init);

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  int64_t submitted_ = 0, done_ = 0;
  std::exception_ptr error_;
  bool stop_ = false;
  std::thread thread_;  // last: starts once the rest exists
};

}  // namespace zt::zero
