#pragma once
// Note [worker queue]: one thread that runs jobs in the order they were queued while the callers
// go on: the sim device's two streams (Note [sim device], Note [copy stream]) and ZeRO-Offload's
// host updates (Note [host update overlap]). A caller waits for a job by its ticket, or until the
// queue is idle; a job's exception is kept (the first one not rethrown yet) and rethrown at the
// next wait, possibly one for another job, while the jobs after it still run: a GPU's sticky
// error, said where the host waits.
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <limits>
#include <mutex>
#include <thread>

namespace zt {

class WorkerQueue {
 public:
  // `init` runs first on the thread (binding it to a device, marking it); its error is rethrown
  // at the first wait. `before_each` runs on the thread before every job, as part of that job.
  explicit WorkerQueue(std::function<void()> init = nullptr, std::function<void()> before_each = nullptr);
  ~WorkerQueue();  // runs what is queued, then joins
  WorkerQueue(const WorkerQueue&) = delete;
  WorkerQueue& operator=(const WorkerQueue&) = delete;

  int64_t submit(std::function<void()> job);  // its ticket: 1, 2, ...
  // Blocks until job `ticket` (and every one before it) has run; rethrows the first error any job
  // has raised (possibly a later one) that was not rethrown yet.
  void wait(int64_t ticket);
  // Blocks until nothing is queued or running (jobs queued meanwhile included); rethrows likewise.
  void wait_idle();

 private:
  void wait_for(int64_t ticket, bool idle);
  void loop(const std::function<void()>& init);

  std::function<void()> before_each_;
  std::mutex mu_;
  std::condition_variable ready_, done_cv_;  // the thread waits on ready_, callers on done_cv_
  std::deque<std::function<void()>> queue_;
  int64_t submitted_ = 0, done_ = 0;
  int64_t wake_at_ = std::numeric_limits<int64_t>::max();  // the smallest ticket a caller waits for
  std::exception_ptr error_;
  bool stop_ = false;
  std::thread thread_;  // last: starts once the rest exists
};

}  // namespace zt
