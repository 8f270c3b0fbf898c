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

// Note [default threads]: a rank's fair share of the processing units, fewer where a launcher bound
// it to fewer (said, with the mpirun options that widen it), never more than the share.
TEST(Affinity, DefaultThreadsAreTheRanksShareOrItsNarrowerBinding) {
  EXPECT_EQ(choose_threads(16, -1, 2).threads, 8);  // not bound: half of the machine each
  EXPECT_EQ(choose_threads(16, -1, 2).note, "");
  EXPECT_EQ(choose_threads(2, -1, 3).threads, 1);      // more ranks than units: still one thread
  const ThreadChoice core = choose_threads(16, 1, 2);  // mpirun's default for 2 ranks: a core each
  EXPECT_EQ(core.threads, 1);
  EXPECT_EQ(core.note,
            "bound to 1 processing unit of 16; under mpirun, --bind-to none or --map-by slot:PE=8 gives "
            "each rank 8");
  EXPECT_EQ(choose_threads(16, 8, 2).threads, 8);  // --map-by slot:PE=8: its share, nothing to say
  EXPECT_EQ(choose_threads(16, 8, 2).note, "");
  EXPECT_EQ(choose_threads(32, 16, 4).threads, 8);  // a socket's binding shared by two ranks: the share
  EXPECT_EQ(choose_threads(32, 16, 4).note, "");
}

TEST(Affinity, EachBranchOfTheCoreShare) {
  const CoreShare half = share_cores(16, -1, 1, 2, 8);  // not bound: rank 1 takes the second half
  EXPECT_EQ(half.first, 8);
  EXPECT_EQ(half.count, 8);
  EXPECT_EQ(half.skip, "");
  const CoreShare one = share_cores(16, 1, 0, 2, 1);  // bound to a core: pinned there
  EXPECT_EQ(one.count, 1);
  EXPECT_EQ(one.skip, "");
  EXPECT_EQ(share_cores(16, 8, 0, 2, 8).skip, "");  // bound to its share exactly
  EXPECT_EQ(share_cores(32, 16, 0, 4, 8).skip,      // a socket of 16 cores for 4 ranks of 8 threads
            "not pinned: this rank is bound to 16 of 32 cores, more than its share (4 ranks): other ranks may be "
            "bound there too");
  EXPECT_EQ(share_cores(32, 16, 0, 4, 16).skip, "");  // its threads fill the binding: nothing to stack
  EXPECT_EQ(share_cores(2, -1, 0, 3, 1).skip, "not pinned: 3 ranks share 2 cores");
  EXPECT_EQ(share_cores(8, -1, 0, 1, 4).skip, "not pinned: 4 of 8 cores");
  EXPECT_EQ(share_cores(8, -1, 0, 1, 8).skip, "");
  EXPECT_EQ(share_cores(16, 1, 0, 2, 8).skip, "not pinned: 8 threads on 1 core");
}

}  // namespace
}  // namespace zt
