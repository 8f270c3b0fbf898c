// main() of the multi-rank tests (zero, ckpt), alone or under mpirun: only rank 0 prints
// gtest's report (the others their failures), and a failure on any rank fails the job's exit code.
#include <cstdlib>
#include <thread>

#include "../common/rank_failures.h"
#include "zero_harness.h"
#include "zt/core/parallel.h"

namespace zt::testing {
comm::GroupPtr g_world;
}

int main(int argc, char** argv) {
  using zt::testing::g_world;
  ::testing::InitGoogleTest(&argc, argv);
  // alone: one local rank; under mpirun: the job (shm on one node); ZT_TEST_BACKEND=mpi picks.
  const char* backend = std::getenv("ZT_TEST_BACKEND");
  g_world = zt::comm::make_group(backend ? backend : "auto");
  // Ranks share the cores, as train's do: more OpenMP threads than cores spin against each other.
  if (const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE"))
    zt::set_num_threads(std::max(1, int(std::thread::hardware_concurrency()) / std::max(1, std::atoi(local))));
  g_world->set_timeout(60);
  zt::testing::report_by_rank(g_world->rank());
  const int rc = RUN_ALL_TESTS();
  zt::comm::CollOptions max;
  max.op = zt::comm::ReduceOp::max;
  const int any = int(g_world->all_reduce_scalar(double(rc), max));
  g_world.reset();
  return any;
}
