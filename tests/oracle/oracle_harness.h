#pragma once
// What the PyTorch oracle tests (MLP, GPT, Llama) share: the job's group, the comparison of a
// tensor with its fixture (largest error, absolute and relative to the fixture's largest
// magnitude), its report on rank 0, and main's set-up: alone one local rank, under mpirun the job,
// and a failure on any rank failing it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "../common/rank_failures.h"
#include "zt/comm/group.h"
#include "zt/core/parallel.h"
#include "zt/core/tensor.h"

namespace zt::oracle {

inline comm::GroupPtr g_world;

struct Mismatch {
  double abs = 0, rel = 0;
};

inline Mismatch compare(const std::vector<float>& got, const std::vector<float>& want) {
  EXPECT_EQ(got.size(), want.size());
  double diff = 0, scale = 0;
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
    diff = std::max(diff, std::abs(double(got[i]) - double(want[i])));
    scale = std::max(scale, std::abs(double(want[i])));
  }
  return {diff, diff / std::max(scale, 1e-30)};
}

// Prints every comparison on rank 0, so a run reports its margins.
inline void expect_within(const Mismatch& e, double tol, const std::string& what) {
  EXPECT_LE(e.rel, tol) << what << ": max abs error " << e.abs << ", relative " << e.rel;
  if (g_world->rank() == 0)
    std::cout << "[oracle] " << what << ": max abs " << e.abs << ", rel " << e.rel << " (bound " << tol << ")\n";
}

inline double global_mean(double local) { return g_world->all_reduce_scalar(local) / double(g_world->size()); }

// The body of each oracle's main.
inline int run_all_tests(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  g_world = comm::make_group("auto");  // mpi under mpirun, else one local rank
  // Ranks share the cores (as tests/zero/mpi_main.cpp's): more OpenMP threads than cores spin.
  if (const char* local = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE"))
    set_num_threads(std::max(1, int(std::thread::hardware_concurrency()) / std::max(1, std::atoi(local))));
  g_world->set_timeout(60);
  zt::testing::report_by_rank(g_world->rank());  // only rank 0 prints gtest's report
  const int rc = RUN_ALL_TESTS();
  Tensor flag = Tensor::from_ints({rc}, {1});
  g_world->all_reduce(flag, comm::ReduceOp::max);  // a failure on any rank fails the job
  const int any = int(flag.item());
  g_world.reset();
  return any;
}

}  // namespace zt::oracle
