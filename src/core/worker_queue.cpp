#include "zt/core/worker_queue.h"

#include <algorithm>
#include <utility>

#include "zt/core/parallel.h"

namespace zt {

WorkerQueue::WorkerQueue(std::function<void()> init, std::function<void()> before_each)
    : before_each_(std::move(before_each)), thread_([this, init = std::move(init)] { loop(init); }) {}

WorkerQueue::~WorkerQueue() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  ready_.notify_one();
  thread_.join();
}

int64_t WorkerQueue::submit(std::function<void()> job) {
  int64_t ticket;
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(job));
    ticket = ++submitted_;
  }
  ready_.notify_one();
  return ticket;
}

void WorkerQueue::wait(int64_t ticket) { wait_for(ticket, false); }
void WorkerQueue::wait_idle() { wait_for(0, true); }

// A caller asks to be woken at the smallest ticket any caller waits for, so a thread waiting for
// the end of a long queue is not woken after every job.
void WorkerQueue::wait_for(int64_t ticket, bool idle) {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    const int64_t target = idle ? submitted_ : ticket;
    if (done_ >= target) break;
    wake_at_ = std::min(wake_at_, target);
    done_cv_.wait(lock);
  }
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

void WorkerQueue::loop(const std::function<void()>& init) {
  adopt_num_threads();  // the kernels' OpenMP teams as set_num_threads chose
  std::exception_ptr init_error;
  try {
    if (init) init();
  } catch (...) {
    init_error = std::current_exception();
  }
  std::unique_lock<std::mutex> lock(mu_);
  error_ = init_error;  // said at the first wait
  for (;;) {
    ready_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, nothing left
    std::function<void()> job = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    std::exception_ptr err;
    try {
      if (before_each_) before_each_();
      job();
    } catch (...) {
      err = std::current_exception();
    }
    job = nullptr;  // what it holds is released before a caller is told it ran
    lock.lock();
    if (err && !error_) error_ = err;
    if (++done_ >= wake_at_) {
      wake_at_ = std::numeric_limits<int64_t>::max();
      done_cv_.notify_all();
    }
  }
}

}  // namespace zt
