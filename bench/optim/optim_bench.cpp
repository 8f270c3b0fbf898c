// optim::update throughput (GB/s of memory traffic) per precision; prints JSON lines.
// Usage: zt_bench_optim [elements=16777216] [threads=all]
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "zt/core/parallel.h"
#include "zt/optim/optimizer.h"

using namespace zt;

struct Case {
  const char* type;
  DType param, grad;
  bool master;
  bool widened = false;  // the f32-compute path's update (Note [widened by the update])
};

int main(int argc, char** argv) {
  const int64_t n = argc > 1 ? std::atoll(argv[1]) : int64_t(1) << 24;
  if (argc > 2) set_num_threads(std::atoi(argv[2]));
  const Case cases[] = {{"AdamW", DType::f32, DType::f32, false},        {"AdamW", DType::bf16, DType::bf16, true},
                        {"AdamW", DType::f16, DType::f16, true},         {"AdamW", DType::bf16, DType::f32, true},
                        {"AdamW", DType::bf16, DType::bf16, true, true}, {"SGD", DType::f32, DType::f32, false},
                        {"SGD", DType::bf16, DType::bf16, true}};
  for (const Case& c : cases) {
    config::OptimizerConfig spec;
    spec.type = c.type;
    spec.weight_decay = 0.01f;
    spec.momentum = 0.9f;
    optim::UpdateArgs a;
    a.param = Tensor::full({n}, 0.5f, c.param);
    if (c.master) a.master = Tensor::full({n}, 0.5f);
    if (c.widened) a.widened = Tensor::zeros({n});
    a.grad = Tensor::full({n}, 0.01f, c.grad);
    for (size_t k = 0; k < optim::state_names(spec).size(); ++k) a.states.push_back(Tensor::zeros({n}));
    a.lr = 1e-3f;
    a.grad_scale = 0.5f;
    optim::update(spec, a);  // warm-up: page in every buffer
    int iters = 0;
    double sec = 0;
    const auto t0 = std::chrono::steady_clock::now();
    while (sec < 1.0 || iters < 3) {
      a.step = iters + 2;
      optim::update(spec, a);
      ++iters;
      sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    // Traffic per element: states read and written, grad read, weight read, master and param written.
    const double states = double(a.states.size()) * 8,
                 w = (c.master ? 4 + 4 + dtype_size(c.param) : 8) + (c.widened ? 4 : 0);
    const double bytes = double(n) * (states + double(dtype_size(c.grad)) + w);
    std::printf(
        "{\"bench\":\"optim_update\",\"type\":\"%s\",\"param\":\"%s\",\"grad\":\"%s\",\"master\":%s,"
        "\"widened\":%s,\"n\":%lld,\"threads\":%d,\"ms\":%.3f,\"gbps\":%.2f}\n",
        c.type, dtype_name(c.param), dtype_name(c.grad), c.master ? "true" : "false", c.widened ? "true" : "false",
        (long long)n, num_threads(), 1e3 * sec / iters, bytes * iters / sec / 1e9);
  }
}
