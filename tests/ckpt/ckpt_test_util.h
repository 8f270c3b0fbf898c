#pragma once
// Helpers of the multi-rank checkpoint tests: a folder every rank agrees on, sub-groups of the
// job, full parameters, training steps. g_world is the job's group (defined by each main()).
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "zero_harness.h"

namespace zt::testing {

// A folder every rank of the job agrees on (rank 0 draws its name).
inline std::string shared_tmpdir(const std::string& what) {
  Tensor id = Tensor::zeros({1}, DType::i64);
  if (g_world->rank() == 0) id.data<int64_t>()[0] = int64_t(std::random_device{}() & 0x7fffffff);
  g_world->broadcast(id, 0);
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("zt_ckpt_" + what + "_" + std::to_string(id.data<int64_t>()[0])))
          .string();
  g_world->barrier();
  return dir;
}

// The ranks [0, n) as a group (others get nullptr and sit out).
inline comm::GroupPtr first_ranks(int n) {
  comm::GroupPtr g = g_world->split(g_world->rank() < n ? 0 : 1, g_world->rank());
  return g_world->rank() < n ? g : nullptr;
}

// Every rank takes part (stage 3 gathers); every rank gets the values.
inline std::vector<std::vector<float>> full_params(zero::Engine& e) {
  std::vector<std::vector<float>> out;
  e.for_each_full_param([&](const std::string&, const Tensor& p) { out.push_back(p.to_vector()); });
  return out;
}

// Steps [from, to) on `e`; returns the global mean loss per step.
inline std::vector<double> run_steps(zero::Engine& e, const RunSpec& s, const Data& d, int64_t from, int64_t to) {
  std::vector<double> losses;
  for (int64_t step = from; step < to; ++step) {
    const double l = train_step(e, s, d, step);
    e.step(1e-2);
    losses.push_back(e.group()->all_reduce_scalar(l) / double(e.group()->size()));
  }
  return losses;
}

}  // namespace zt::testing
