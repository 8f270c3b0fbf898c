// Note [host update overlap]: the thread that runs ZeRO-Offload's host updates behind backward.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include "host_worker.h"

namespace zt::zero {
namespace {

TEST(HostWorker, RunsJobsInOrderOffTheCallersThreadAndWaitsByTicket) {
  std::vector<int> order;
  std::atomic<bool> release{false};
  std::thread::id ran_on;
  HostWorker w;
  const int64_t first = w.submit([&] {
    while (!release.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    ran_on = std::this_thread::get_id();
    order.push_back(1);
  });
  const int64_t second = w.submit([&] { order.push_back(2); });
  EXPECT_EQ(first, 1);
  EXPECT_EQ(second, 2);
  release = true;  // the caller went on while the first job was held
  w.wait(second);  // the second waits for the first too
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
  EXPECT_NE(ran_on, std::this_thread::get_id());
}

TEST(HostWorker, AJobsErrorIsRethrownAtAWaitAndTheRestStillRun) {
  HostWorker w;
  bool later = false;
  const int64_t bad = w.submit([] { throw std::runtime_error("tile 3 failed"); });
  const int64_t next = w.submit([&] { later = true; });
  try {
    w.wait(bad);
    FAIL() << "the job's error was not rethrown";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "tile 3 failed");
  }
  EXPECT_NO_THROW(w.wait(next));  // said once
  EXPECT_TRUE(later);
}

TEST(HostWorker, ItsInitRunsOnItsThreadBeforeAnyJob) {
  std::thread::id init_on, job_on;
  std::vector<int> order;
  HostWorker w([&] {
    init_on = std::this_thread::get_id();
    order.push_back(0);
  });
  w.wait(w.submit([&] {
    job_on = std::this_thread::get_id();
    order.push_back(1);
  }));
  EXPECT_EQ(order, (std::vector<int>{0, 1}));
  EXPECT_EQ(init_on, job_on);
  EXPECT_NE(init_on, std::this_thread::get_id());
  HostWorker failing([] { throw std::runtime_error("no device"); });  // said at the first wait
  EXPECT_THROW(failing.wait(failing.submit([] {})), std::runtime_error);
}

TEST(HostWorker, ItsDestructorRunsWhatIsQueued) {
  std::atomic<int> ran{0};
  {
    HostWorker w;
    for (int i = 0; i < 5; ++i) w.submit([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        ++ran;
      });
  }
  EXPECT_EQ(ran.load(), 5);
}

}  // namespace
}  // namespace zt::zero
