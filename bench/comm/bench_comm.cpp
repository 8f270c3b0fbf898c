// Bus bandwidth of the comm collectives, defined as nccl-tests does (in-place where the op
// allows), for the mpi and shm backends side by side, plus one core's memcpy bandwidth as the
// ceiling. Run: mpirun -np 2 bench_comm [--backend mpi|shm|shm-staged]... [--dtype f32|bf16|f16]...
// [MiB ...] (defaults: all three, f32 and bf16, 1 16 128 MiB); rank 0 prints one JSON line per case.
// shm-staged is shm with ZT_SHM_SINGLE_COPY=0: every byte through the staging slots. Last, each
// backend's cost of the collective check per collective (a 4-byte all_reduce, with and without).
// --sim-chunks instead times sim tensors staged through each backend (Note [staged chunks]):
// whole calls against 4 MiB chunks, in alternating blocks, with their ratio.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "zt/comm/group.h"

using namespace zt;
using namespace zt::comm;

namespace {

// Seconds per call, the slowest rank's view (as nccl-tests reports).
double time_op(Group& g, int iters, const std::function<void()>& op) {
  for (int i = 0; i < 2; ++i) op();  // warm-up: first-touch and protocol setup
  g.barrier();
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) op();
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iters;
  return g.all_reduce_scalar(s, ReduceOp::max);
}

int iters_for(int64_t mib) { return int(std::clamp<int64_t>(100 / std::max<int64_t>(mib, 1), 5, 100)); }

// One rank copies while the others wait: what one core moves with nobody competing.
void bench_memcpy(Group& g, int64_t mib) {
  const size_t bytes = size_t(mib) << 20;
  std::vector<char> a(bytes, 1), b(bytes, 2);
  const int iters = iters_for(mib);
  double s = 0;
  g.barrier();
  if (g.rank() == 0) {
    std::memcpy(b.data(), a.data(), bytes);
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) std::memcpy(i % 2 ? a.data() : b.data(), i % 2 ? b.data() : a.data(), bytes);
    s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iters;
    std::printf(
        "{\"op\":\"memcpy\",\"backend\":\"one core\",\"bytes\":%zu,\"iters\":%d,\"time_us\":%.1f,\"GBps\":%.3f}\n",
        bytes, iters, s * 1e6, double(bytes) / s / 1e9);
    std::fflush(stdout);
  }
  g.barrier();
}

void bench_backend(Group& g, const std::string& name, DType dt, int64_t mib) {
  const int n = g.size();
  const int64_t esize = int64_t(dtype_size(dt));
  const int64_t elems = (mib << 20) / esize / n * n, bytes = elems * esize;
  const int iters = iters_for(mib);
  Tensor full = Tensor::empty({elems}, dt, MemTag::comm);
  Tensor shard = Tensor::empty({elems / n}, dt, MemTag::comm);
  full.fill_(1.f);
  shard.fill_(1.f);
  struct Case {
    const char* op;
    double factor;  // algorithm bandwidth -> bus bandwidth (nccl-tests PERFORMANCE.md)
    std::function<void()> run;
  } cases[] = {
      {"all_reduce", 2.0 * (n - 1) / n, [&] { g.all_reduce(full); }},
      {"reduce_scatter", double(n - 1) / n, [&] { g.reduce_scatter(full, shard); }},
      {"all_gather", double(n - 1) / n, [&] { g.all_gather(shard, full); }},
  };
  for (const Case& c : cases) {
    double s = time_op(g, iters, c.run);
    double algbw = double(bytes) / s / 1e9;
    if (g.rank() == 0)
      std::printf(
          "{\"op\":\"%s\",\"backend\":\"%s\",\"dtype\":\"%s\",\"ranks\":%d,\"bytes\":%lld,\"iters\":%d,"
          "\"time_us\":%.1f,\"algbw_GBps\":%.3f,\"busbw_GBps\":%.3f}\n",
          c.op, name.c_str(), dtype_name(dt), n, (long long)bytes, iters, s * 1e6, algbw, algbw * c.factor);
    std::fflush(stdout);
  }
}

// Note [collective signatures]: a 4-byte all_reduce's latency with the check and without, in
// alternating blocks (a noisy machine slows both alike): the check's cost per collective.
void bench_check(Group& g, const std::string& name) {
  Tensor one = Tensor::full({1}, 1.f);
  double us[2] = {0, 0};
  constexpr int kBlocks = 6, kIters = 400;
  for (int b = 0; b < kBlocks; ++b)
    for (bool on : {b % 2 == 0, b % 2 != 0}) {
      g.set_check_collectives(on);
      us[on] += time_op(g, kIters, [&] { g.all_reduce(one); }) * 1e6 / kBlocks;
    }
  g.set_check_collectives(true);
  if (g.rank() == 0)
    std::printf("{\"op\":\"all_reduce_4B_check\",\"backend\":\"%s\",\"ranks\":%d,\"time_us_check\":%.2f,"
                "\"time_us_no_check\":%.2f,\"check_cost_us\":%.2f}\n",
                name.c_str(), g.size(), us[1], us[0], us[1] - us[0]);
  std::fflush(stdout);
}

// Note [staged chunks]: the same collectives of sim tensors through `host`, staged whole and in
// kStagedChunkBytes chunks, alternating blocks so that a noisy machine slows both alike.
void bench_sim_chunks(const GroupPtr& host, const std::string& name, DType dt, int64_t mib) {
  const int n = host->size();
  const int64_t elems = (mib << 20) / int64_t(dtype_size(dt)) / n * n;
  Tensor full = Tensor::full({elems}, 1.f, dt).to(Device::sim()), shard = Tensor::zeros({elems / n}, dt, Device::sim());
  GroupPtr staged[2] = {stage_on(host, Device::sim(), int64_t(1) << 62), stage_on(host, Device::sim())};
  for (const char* op : {"all_reduce", "reduce_scatter"}) {
    double us[2] = {0, 0};
    constexpr int kBlocks = 4;
    for (int b = 0; b < kBlocks; ++b)
      for (int k : {b % 2, 1 - b % 2}) {
        Group& g = *staged[k];
        us[k] += time_op(g, iters_for(mib),
                         [&] {
                           if (op[0] == 'a')
                             g.all_reduce(full);
                           else
                             g.reduce_scatter(full, shard);
                           synchronize(Device::sim());
                         }) *
                 1e6 / kBlocks;
      }
    if (host->rank() == 0)
      std::printf(
          "{\"op\":\"%s\",\"backend\":\"%s staged from sim\",\"dtype\":\"%s\",\"ranks\":%d,"
          "\"bytes\":%lld,\"time_us_whole\":%.1f,\"time_us_chunked\":%.1f,\"chunk_bytes\":%lld,"
          "\"whole_over_chunked\":%.3f}\n",
          op, name.c_str(), dtype_name(dt), n, (long long)(elems * int64_t(dtype_size(dt))), us[0], us[1],
          (long long)kStagedChunkBytes, us[0] / us[1]);
    std::fflush(stdout);
  }
}

}  // namespace

int main(int argc, char** argv) {
  try {
    std::vector<int64_t> sizes_mib;  // optional arguments: buffer sizes in MiB
    std::vector<DType> dtypes;
    std::vector<std::string> backends;
    bool sim_chunks = false;
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      if (a == "--dtype" && i + 1 < argc)
        dtypes.push_back(dtype_from_name(argv[++i]));
      else if (a == "--sim-chunks")
        sim_chunks = true;
      else if (a == "--backend" && i + 1 < argc)
        backends.push_back(argv[++i]);
      else
        sizes_mib.push_back(std::atoll(argv[i]));
    }
    if (sizes_mib.empty()) sizes_mib = {1, 16, 128};
    if (dtypes.empty()) dtypes = {DType::f32, DType::bf16};
    if (backends.empty()) backends = {"mpi", "shm", "shm-staged"};
    std::vector<GroupPtr> groups;
    for (const std::string& b : backends) {  // collective, in the same order
      const bool staged = b == "shm-staged";
      if (staged) setenv("ZT_SHM_SINGLE_COPY", "0", 1);  // read when the group is made
      groups.push_back(make_group(staged ? "shm" : b));
      if (staged) unsetenv("ZT_SHM_SINGLE_COPY");
    }
    if (sim_chunks) {
      for (size_t i = 0; i < groups.size(); ++i)
        for (DType dt : dtypes)
          for (int64_t mib : sizes_mib) bench_sim_chunks(groups[i], backends[i], dt, mib);
      return 0;
    }
    for (int64_t mib : sizes_mib) bench_memcpy(*groups[0], mib);
    for (size_t i = 0; i < groups.size(); ++i)
      for (DType dt : dtypes)
        for (int64_t mib : sizes_mib) bench_backend(*groups[i], backends[i], dt, mib);
    for (size_t i = 0; i < groups.size(); ++i) bench_check(*groups[i], backends[i]);
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
