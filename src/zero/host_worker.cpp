#include "host_worker.h"

#include "zt/core/parallel.h"

namespace zt::zero {

HostWorker::HostWorker(std::function<void()> init) : thread_([this, init = std::move(init)] { loop(init); }) {}

HostWorker::~HostWorker() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

int64_t HostWorker::submit(std::function<void()> job) {
  std::lock_guard<std::mutex> lock(mu_);
  queue_.push_back(std::move(job));
  cv_.notify_all();
  return ++submitted_;
}

void HostWorker::wait(int64_t ticket) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return done_ >= ticket; });
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

void HostWorker::loop(const std::function<void()>& init) {
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
    cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, nothing left
    std::function<void()> job = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    std::exception_ptr err;
    try {
      job();
    } catch (...) {
      err = std::current_exception();
    }
    lock.lock();
    if (err && !error_) error_ = err;
    ++done_;
    cv_.notify_all();
  }
}

}  // namespace zt::zero
