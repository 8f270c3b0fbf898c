// Bus bandwidth of the comm collectives, defined as nccl-tests does (in-place where the op
// allows). Run: mpirun -np 2 bench_comm [--dtype f32|bf16|f16] [--backend B] [MiB ...]; rank 0 prints one
// JSON line per op and size. --backend NAME picks the group (default auto).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
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

}  // namespace

int main(int argc, char** argv) {
  try {
    std::vector<int64_t> sizes_mib;  // optional arguments: buffer sizes in MiB
    DType dt = DType::f32;
    std::string backend = "auto";  // --backend: any name comm::make_group knows
    for (int i = 1; i < argc; ++i) {
      if (std::string(argv[i]) == "--dtype" && i + 1 < argc)
        dt = dtype_from_name(argv[++i]);
      else if (std::string(argv[i]) == "--backend" && i + 1 < argc)
        backend = argv[++i];
      else
        sizes_mib.push_back(std::atoll(argv[i]));
    }
    const int64_t esize = int64_t(dtype_size(dt));
    if (sizes_mib.empty()) sizes_mib = {1, 16, 128};
    GroupPtr g = make_group(backend);
    const int n = g->size();
    for (int64_t mib : sizes_mib) {
      const int64_t elems = (mib << 20) / esize / n * n, bytes = elems * esize;
      const int iters = int(std::clamp<int64_t>(100 / mib, 5, 100));
      Tensor full = Tensor::empty({elems}, dt, MemTag::comm);
      Tensor shard = Tensor::empty({elems / n}, dt, MemTag::comm);
      full.fill_(1.f);
      shard.fill_(1.f);
      struct Case {
        const char* op;
        double factor;  // algorithm bandwidth -> bus bandwidth (nccl-tests PERFORMANCE.md)
        std::function<void()> run;
      } cases[] = {
          {"all_reduce", 2.0 * (n - 1) / n, [&] { g->all_reduce(full); }},
          {"reduce_scatter", double(n - 1) / n, [&] { g->reduce_scatter(full, shard); }},
          {"all_gather", double(n - 1) / n, [&] { g->all_gather(shard, full); }},
      };
      for (const Case& c : cases) {
        double s = time_op(*g, iters, c.run);
        double algbw = double(bytes) / s / 1e9;
        if (g->rank() == 0)
          std::printf(
              "{\"op\":\"%s\",\"backend\":\"%s\",\"dtype\":\"%s\",\"ranks\":%d,\"bytes\":%lld,\"iters\":%d,"
              "\"time_us\":%.1f,\"algbw_GBps\":%.3f,\"busbw_GBps\":%.3f}\n",
              c.op, g->backend(), dtype_name(dt), n, (long long)bytes, iters, s * 1e6, algbw, algbw * c.factor);
        std::fflush(stdout);
      }
    }
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
