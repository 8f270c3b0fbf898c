// Training throughput of the 784-256-256-10 ReLU MLP (AdamW, lr 1e-3, global batch 64) on real
// MNIST batches through zero::Engine. Under `mpirun -np N` every requested stage runs in turn in
// the same processes, so stage S / stage 0 is measured in one run; rank 0 prints one JSON line
// per stage. step_ms is the median of rank 0's per-step times; samples_per_s is global batch x
// timed steps / total timed seconds (the slowest rank's). --dtype bf16|f16 trains in mixed
// precision; --hidden 4096,4096 changes the model; peak memory per rank is reported both from
// the allocator's tagged peak and as the operating system's peak RSS (run one stage per process
// for a per-stage RSS figure).
#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "train_bench.h"
#include "zt/autograd/functions.h"
#include "zt/comm/group.h"
#include "zt/core/error.h"
#include "zt/core/parallel.h"
#include "zt/data/mnist.h"
#include "zt/nn/module.h"
#include "zt/zero/engine.h"

using namespace zt;

namespace {

constexpr int64_t kGlobalBatch = 64;

struct Args {
  std::vector<int> stages;  // empty: 0 for one process, 0,1,2,3 for several
  int64_t steps = 300, warmup = 20;
  int threads = 0;  // 0: cores shared by the ranks on this node
  std::string data = "data/mnist", backend = "auto";
  DType dtype = DType::f32;
  std::vector<int64_t> hidden = {256, 256};
  int64_t bucket = 500'000'000;
  // Gradient elements whose reduction may be in flight (0: 4 buckets, so that the buckets of one
  // large layer, ready together, reduce while backward goes on; the engine's default is 1 bucket).
  int64_t inflight = 0;
};

void usage() {
  std::fprintf(
      stderr,
      "usage: bench_train [--stages 0,1,2,3] [--steps N] [--warmup N] [--threads T] [--data DIR] "
      "[--backend auto|local|mpi] [--dtype f32|bf16|f16] [--hidden 256,256] [--bucket ELEMS] [--inflight ELEMS]\n");
}

std::vector<int> parse_stages(const std::string& s) {
  std::vector<int> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');) {
    ZT_CHECK(item.size() == 1 && item[0] >= '0' && item[0] <= '3', "[bench_train] --stages: '", item,
             "' is not a stage; allowed 0, 1, 2, 3 (comma-separated)");
    out.push_back(item[0] - '0');
  }
  ZT_CHECK(!out.empty(), "[bench_train] --stages: empty list");
  return out;
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (k == "--help" || k == "-h") {
      usage();
      std::exit(0);
    }
    ZT_CHECK(i + 1 < argc, "[bench_train] option ", k, " needs a value");
    const std::string v = argv[++i];
    if (k == "--stages")
      a.stages = parse_stages(v);
    else if (k == "--steps")
      a.steps = std::atoll(v.c_str());
    else if (k == "--warmup")
      a.warmup = std::atoll(v.c_str());
    else if (k == "--threads")
      a.threads = std::atoi(v.c_str());
    else if (k == "--data")
      a.data = v;
    else if (k == "--backend")
      a.backend = v;
    else if (k == "--dtype")
      a.dtype = dtype_from_name(v);
    else if (k == "--inflight")
      a.inflight = std::atoll(v.c_str());
    else if (k == "--bucket")
      a.bucket = std::atoll(v.c_str());
    else if (k == "--hidden") {
      a.hidden.clear();
      std::stringstream ss(v);
      for (std::string item; std::getline(ss, item, ',');) a.hidden.push_back(std::atoll(item.c_str()));
    } else
      ZT_THROW("[bench_train] unknown option ", k,
               "; allowed --stages --steps --warmup --threads --data --backend --dtype --hidden --bucket --inflight");
  }
  ZT_CHECK(a.steps > 0 && a.warmup >= 0, "[bench_train] --steps must be > 0 and --warmup >= 0, got ", a.steps, " and ",
           a.warmup);
  return a;
}

struct Result {
  double step_ms_median, step_ms_mean, samples_per_s, final_loss;
  int64_t params, peak_bytes, states_bytes;
  zero::CommOverlap reduce, gather;
};

// Rank r's micro-batch of global step s: rows [s*64 + r*micro, +micro) of the training set, in
// file order, wrapping at the end of the epoch (as `zerotrain train` with shuffle off).
Result run_stage(int stage, const Args& a, const data::Dataset& ds, const comm::GroupPtr& g) {
  const int64_t world = g->size(), micro = kGlobalBatch / world, per_epoch = ds.size() / kGlobalBatch;
  Allocator::global().release_cached();
  Allocator::global().reset_peaks();
  const size_t base = Allocator::global().stats().total_current;
  auto model = nn::make_mlp(784, a.hidden, 10, "relu", 42);
  zero::EngineOptions o;
  o.zero.stage = stage;
  o.dtype = a.dtype;
  o.zero.reduce_bucket_size = a.bucket;
  o.max_inflight_reduce_elems = a.inflight > 0 ? a.inflight : 4 * a.bucket;
  // Stage 3 gathers ahead at most one bucket's worth (DeepSpeed's default of 5e7 elements would
  // hold three 16.8M-element layers of the memory model gathered at once).
  o.zero.stage3_prefetch_bucket_size = std::min<int64_t>(a.bucket, o.zero.stage3_prefetch_bucket_size);
  o.optimizer.type = "AdamW";
  o.optimizer.lr = 1e-3f;
  o.optimizer.weight_decay = 0.01f;  // torch.optim.AdamW's default
  zero::Engine engine(*model, g, o);
  const bench::TimedSteps t = bench::time_steps(*g, a.warmup, a.steps, [&](int64_t s) {
    const int64_t b = (s % per_epoch) * kGlobalBatch + g->rank() * micro;
    Tensor l = ag::cross_entropy(engine.forward(ds.images.slice(0, b, b + micro)), ds.labels.slice(0, b, b + micro));
    engine.backward(l);
    return std::make_pair(engine.step(1e-3), l);
  });
  const int64_t peak = int64_t(Allocator::global().stats().total_peak - base);
  return {1e3 * t.median_s,
          1e3 * t.mean_s,
          double(kGlobalBatch * a.steps) / t.total_s,
          t.last_loss,
          engine.num_params(),
          peak,
          engine.expected_memory().total(),
          t.reduce,
          t.gather};
}

}  // namespace

int main(int argc, char** argv) {
  try {
    Args a = parse(argc, argv);
    comm::GroupPtr g = comm::make_group(a.backend);
    const int world = g->size();
    ZT_CHECK(kGlobalBatch % world == 0, "[bench_train] global batch ", kGlobalBatch, " is not divisible by ", world,
             " ranks");
    if (a.stages.empty()) a.stages = world == 1 ? std::vector<int>{0} : std::vector<int>{0, 1, 2, 3};
    const int threads = a.threads > 0 ? a.threads : bench::default_threads();
    set_num_threads(threads);
    const data::Dataset ds = data::load_mnist(a.data, "train");
    for (int stage : a.stages) {
      const Result r = run_stage(stage, a, ds, g);
      if (g->rank() != 0) continue;
      rusage ru{};
      getrusage(RUSAGE_SELF, &ru);
      std::printf(
          "{\"bench\":\"mlp_train\",\"impl\":\"zerotrain\",\"backend\":\"%s\",\"stage\":%d,\"world\":%d,\"threads\":%d,"
          "\"dtype\":\"%s\",\"params\":%lld,\"batch\":%lld,\"steps\":%lld,\"samples_per_s\":%.1f,\"step_ms\":%.4f,"
          "\"step_ms_mean\":%.4f,\"final_loss\":%.4f,\"peak_mib\":%.1f,\"states_mib\":%.1f,\"peak_rss_mib\":%.1f,%s"
          "\"timing\":\"step_ms=median per step (rank 0); samples_per_s=batch*steps/total\"}\n",
          g->backend(), stage, world, threads, dtype_name(a.dtype), (long long)r.params, (long long)kGlobalBatch,
          (long long)a.steps, r.samples_per_s, r.step_ms_median, r.step_ms_mean, r.final_loss,
          double(r.peak_bytes) / 1048576.0, double(r.states_bytes) / 1048576.0, double(ru.ru_maxrss) / 1024.0,
          bench::overlap_fields(r.reduce, r.gather).c_str());
      std::fflush(stdout);
    }
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "bench_train: %s\n", e.what());
    return 1;
  }
}
