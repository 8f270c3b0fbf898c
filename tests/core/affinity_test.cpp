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
    const Pinning p = pin_threads(1, 2, 1, false);  // rank 1 of 2: the second half of the cores
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
    const Pinning p = pin_threads(0, 100000, 1, false);
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
    const Pinning p = pin_threads(0, 1, n, false);
    EXPECT_TRUE(p.cores.empty());
    EXPECT_NE(p.note.find(std::to_string(n) + " threads on"), std::string::npos) << p.note;
  });
}

TEST(Affinity, ALoneProcessUsingFewerThreadsThanCoresIsNotPinned) {
  if (std::thread::hardware_concurrency() < 2) GTEST_SKIP() << "needs two cores";
  on_fresh_thread([] {
    const Pinning p = pin_threads(0, 1, 1, false);
    EXPECT_TRUE(p.cores.empty());
    EXPECT_NE(p.note.find("not pinned: 1 of"), std::string::npos) << p.note;
  });
}

// Note [default threads]: a rank's share of the machine's units, fewer where mpirun bound it to
// fewer (said, with the options that widen it, in cores as mpirun counts them); a mask around the
// whole job is split among its ranks.
TEST(Affinity, DefaultThreadsFollowTheLaunchersBinding) {
  const Cpus machine{32, 16};  // 16 cores of 2 hardware threads
  const CpuView free{machine, machine};
  EXPECT_EQ(choose_threads(free, false, 2).threads, 16);  // half of the machine each
  EXPECT_EQ(choose_threads(free, false, 2).note, "");
  EXPECT_EQ(choose_threads({{2, 2}, {2, 2}}, false, 3).threads, 1);      // more ranks than units: still one
  const ThreadChoice core = choose_threads({machine, {2, 1}}, true, 2);  // mpirun's default for 2 ranks
  EXPECT_EQ(core.threads, 2);
  EXPECT_EQ(core.note,
            "mpirun bound this rank to 2 processing units of 32; --bind-to none, or --map-by slot:PE=8, "
            "gives each rank 16");
  EXPECT_EQ(choose_threads({machine, {16, 8}}, true, 2).threads, 16);  // --map-by slot:PE=8: its share exactly
  EXPECT_EQ(choose_threads({machine, {16, 8}}, true, 2).note, "");
  EXPECT_EQ(choose_threads({{64, 32}, {32, 16}}, true, 4).threads, 16);  // a socket two ranks share: the share
  EXPECT_EQ(choose_threads(free, true, 4).threads, 8);                // bound to the whole (one-socket) machine: split
  EXPECT_EQ(choose_threads({machine, {8, 4}}, false, 2).threads, 4);  // taskset around mpirun: split it
  EXPECT_EQ(choose_threads({machine, {8, 4}}, false, 2).note, "");
  EXPECT_EQ(choose_threads({machine, {1, 1}}, false, 1).note, "bound to 1 processing unit of 32");  // a lone taskset
}

TEST(Affinity, EachBranchOfTheCoreShare) {
  const Cpus machine{16, 16};
  const CoreShare half = share_cores({machine, machine}, false, 1, 2, 8);  // rank 1 takes the second half
  EXPECT_EQ(half.first, 8);
  EXPECT_EQ(half.count, 8);
  EXPECT_EQ(half.skip, "");
  const CoreShare job = share_cores({machine, {4, 4}}, false, 1, 2, 2);  // a job's mask of 4 cores, split
  EXPECT_EQ(job.first, 2);
  EXPECT_EQ(job.count, 2);
  EXPECT_EQ(job.skip, "");
  const CoreShare one = share_cores({machine, {1, 1}}, true, 0, 2, 1);  // mpirun bound it to a core: there
  EXPECT_EQ(one.first, 0);
  EXPECT_EQ(one.count, 1);
  EXPECT_EQ(one.skip, "");
  EXPECT_EQ(share_cores({machine, {8, 8}}, true, 0, 2, 8).skip, "");        // bound to its share exactly
  const CoreShare socket = share_cores({machine, machine}, true, 3, 4, 4);  // np 4 bound to the one socket:
  EXPECT_EQ(socket.first, 12);                                              // as if not bound, split
  EXPECT_EQ(socket.skip, "");
  EXPECT_EQ(share_cores({{32, 32}, {16, 16}}, true, 0, 4, 8).skip,  // a socket of 16 cores, 4 ranks of 8
            "not pinned: this rank is bound to 16 of 32 cores, more than its share (4 ranks): other ranks may be "
            "bound there too");
  EXPECT_EQ(share_cores({{32, 32}, {16, 16}}, true, 0, 4, 16).skip, "");  // its threads fill the binding
  EXPECT_EQ(share_cores({{2, 2}, {2, 2}}, false, 0, 3, 1).skip, "not pinned: 3 ranks share 2 cores");
  EXPECT_EQ(share_cores({machine, {1, 1}}, false, 0, 2, 1).skip, "not pinned: 2 ranks share 1 core");
  EXPECT_EQ(share_cores({{8, 8}, {8, 8}}, false, 0, 1, 4).skip, "not pinned: 4 of 8 cores");
  EXPECT_EQ(share_cores({{8, 8}, {4, 4}}, false, 0, 1, 2).skip, "");  // a lone taskset's cores are meant to be used
  EXPECT_EQ(share_cores({{8, 8}, {8, 8}}, false, 0, 1, 8).skip, "");
  EXPECT_EQ(share_cores({machine, {1, 1}}, true, 0, 2, 8).skip, "not pinned: 8 threads on 1 core");
}

}  // namespace
}  // namespace zt
