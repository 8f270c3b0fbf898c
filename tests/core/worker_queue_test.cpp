// The worker queue (Note [worker queue]): the sim streams' and the host updates' one thread.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include "zt/core/worker_queue.h"

namespace zt {
namespace {

TEST(WorkerQueue, WaitIdleWaitsForJobsQueuedByJobsAndSaysAnErrorOnce) {
  std::vector<int> order;
  int before = 0;
  WorkerQueue q(nullptr, [&] { ++before; });
  q.submit([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    order.push_back(1);
    q.submit([&] { order.push_back(3); });  // queued from the thread: still waited for
  });
  q.submit([] { throw std::runtime_error("kernel 2 failed"); });
  EXPECT_THROW(q.wait_idle(), std::runtime_error);
  EXPECT_EQ(order, (std::vector<int>{1, 3}));  // the jobs after the failed one still ran
  EXPECT_EQ(before, 3);                        // before every job, on the thread
  EXPECT_NO_THROW(q.wait_idle());              // said once
}

TEST(WorkerQueue, ManyWaitersForDifferentTicketsAllWake) {
  WorkerQueue q;
  std::atomic<int> ran{0};
  std::vector<int64_t> tickets;
  for (int i = 0; i < 50; ++i) tickets.push_back(q.submit([&] { ++ran; }));
  std::vector<std::thread> waiters;
  for (int i = 0; i < 50; i += 7) waiters.emplace_back([&, i] { q.wait(tickets[size_t(i)]); });
  for (auto& w : waiters) w.join();
  q.wait_idle();
  EXPECT_EQ(ran.load(), 50);
}

}  // namespace
}  // namespace zt
