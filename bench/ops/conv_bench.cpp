// Convolution throughput (GFLOP/s) through zt::ops at the CNN's shapes (configs/cnn_fashion.json,
// one rank's micro-batch): forward, backward data and backward weights in f32 and bf16 (oneDNN's
// bf16 kernel where the CPU has one, and the forced f32 fallback beside it), and max pooling
// (GB/s moved). Prints JSON lines.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "bench_util.h"
#include "zt/core/parallel.h"
#include "zt/core/random.h"
#include "zt/ops/conv.h"

using namespace zt;

namespace {

void conv_lines(int64_t n, int64_t cin, int64_t size, int64_t cout, DType dt, bool fallback) {
  Tensor x = bench::uniform({n, cin, size, size}, dt), w = bench::uniform({cout, cin, 3, 3}, dt),
         b = bench::uniform({cout}, dt);
  const ops::Conv2dParams p{1, 1};
  Tensor dy = bench::uniform({n, cout, size, size}, dt);
  const double flops = 2.0 * double(n * cout * size * size * cin * 9);
  ops::set_conv_lowp_fallback_for_testing(fallback);
  const double fwd = bench::seconds_per_call([&] { ops::conv2d(x, w, &b, p); });
  const double bwd_w = bench::seconds_per_call([&] { ops::conv2d_backward(dy, x, w, p, false, true); });
  const double bwd_all = bench::seconds_per_call([&] { ops::conv2d_backward(dy, x, w, p, true, true); });
  ops::set_conv_lowp_fallback_for_testing(false);
  const char* path = dt == DType::f32 ? "f32" : (fallback || !ops::conv_native(dt) ? "f32_fallback" : "onednn_lowp");
  std::printf(
      "{\"op\":\"conv2d\",\"x\":[%ld,%ld,%ld,%ld],\"cout\":%ld,\"dtype\":\"%s\",\"path\":\"%s\",\"threads\":%d,"
      "\"forward_gflops\":%.1f,\"backward_weights_gflops\":%.1f,\"backward_data_gflops\":%.1f}\n",
      long(n), long(cin), long(size), long(size), long(cout), dtype_name(dt), path, num_threads(), flops / fwd / 1e9,
      flops / bwd_w / 1e9, flops / std::max(bwd_all - bwd_w, 1e-12) / 1e9);
}

void pool_line(int64_t n, int64_t c, int64_t size, DType dt) {
  Tensor x = bench::uniform({n, c, size, size}, dt);
  const double fwd = bench::seconds_per_call([&] { ops::max_pool2d(x, 2, 2); });
  const ops::MaxPoolResult r = ops::max_pool2d(x, 2, 2);
  Tensor dy = bench::uniform(r.y.shape(), dt);
  const double bwd = bench::seconds_per_call([&] { ops::max_pool2d_backward(dy, r, x.shape()); });
  const double bytes = double(x.nbytes() + r.y.nbytes() + r.argmax.nbytes());
  std::printf(
      "{\"op\":\"max_pool2d\",\"x\":[%ld,%ld,%ld,%ld],\"dtype\":\"%s\",\"forward_gbps\":%.2f,"
      "\"backward_gbps\":%.2f}\n",
      long(n), long(c), long(size), long(size), dtype_name(dt), bytes / fwd / 1e9, bytes / bwd / 1e9);
}

}  // namespace

// Usage: zt_bench_conv [batch] (default 64, one rank's micro-batch of configs/cnn_fashion.json).
int main(int argc, char** argv) {
  const int64_t n = argc > 1 ? std::atol(argv[1]) : 64;
  struct Stage {
    int64_t cin, size, cout;
  };
  for (DType dt : {DType::f32, DType::bf16})
    for (const Stage& s : {Stage{1, 32, 64}, Stage{64, 16, 128}, Stage{128, 8, 256}}) {
      conv_lines(n, s.cin, s.size, s.cout, dt, false);
      if (dt != DType::f32) conv_lines(n, s.cin, s.size, s.cout, dt, true);
    }
  for (DType dt : {DType::f32, DType::bf16})
    for (const Stage& s : {Stage{64, 32, 0}, Stage{128, 16, 0}, Stage{256, 8, 0}}) pool_line(n, s.cin, s.size, dt);
  return 0;
}
