// Thread pinning: each branch of pin_threads (pinned, more ranks than cores, more threads than
// the share), checked against the cores the OS then reports for the calling thread.
#include <gtest/gtest.h>
#include <sched.h>

#include <thread>

#include "zt/core/affinity.h"
#include "zt/core/parallel.h"

namespace zt {
namespace {

// Pinning changes the calling thread for good, so each case runs on a fresh thread.
template <typename Fn>
void on_fresh_thread(Fn fn) {
  std::thread t(fn);
  t.join();
}

TEST(Affinity, PinsOneThreadToOneCoreOfItsShare) {
  if (std::thread::hardware_concurrency() < 2) GTEST_SKIP() << "needs two cores";
  on_fresh_thread([] {
    const Pinning p = pin_threads(1, 2, 1);  // rank 1 of 2: the second half of the cores
    ASSERT_EQ(p.cores.size(), 1u) << p.note;
    EXPECT_NE(p.note.find("pinned to core"), std::string::npos) << p.note;
    cpu_set_t set;
    ASSERT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
    EXPECT_EQ(CPU_COUNT(&set), 1);  // one hardware thread of the core
  });
}

TEST(Affinity, MoreRanksThanCoresLeavesThreadsUnpinned) {
  on_fresh_thread([] {
    cpu_set_t before;
    sched_getaffinity(0, sizeof before, &before);
    const Pinning p = pin_threads(0, 100000, 1);
    EXPECT_TRUE(p.cores.empty());
    EXPECT_NE(p.note.find("100000 ranks share"), std::string::npos) << p.note;
    cpu_set_t after;
    sched_getaffinity(0, sizeof after, &after);
    EXPECT_TRUE(CPU_EQUAL(&before, &after));
  });
}

TEST(Affinity, MoreThreadsThanCoresLeavesThreadsUnpinned) {
  on_fresh_thread([] {
    const int n = int(std::thread::hardware_concurrency()) + 1;
    const Pinning p = pin_threads(0, 1, n);
    EXPECT_TRUE(p.cores.empty());
    EXPECT_NE(p.note.find(std::to_string(n) + " threads on"), std::string::npos) << p.note;
  });
}

TEST(Affinity, ALoneProcessUsingFewerThreadsThanCoresIsNotPinned) {
  if (std::thread::hardware_concurrency() < 2) GTEST_SKIP() << "needs two cores";
  on_fresh_thread([] {
    const Pinning p = pin_threads(0, 1, 1);
    EXPECT_TRUE(p.cores.empty());
    EXPECT_NE(p.note.find("not pinned: 1 of"), std::string::npos) << p.note;
  });
}

}  // namespace
}  // namespace zt
