// Matmul throughput (GFLOP/s) through zt::ops::matmul in f32, bf16 and f16 (oneDNN's 16-bit
// kernel where the CPU has one, and the forced f32 fallback beside it); prints JSON lines.
// Also the whole-buffer precision ops (GB/s moved) that mixed-precision training runs each step.
// usage: zt_bench_matmul [MxKxN ...]   (shapes given: f32 and bf16 at those shapes only)
#include <chrono>
#include <cstdio>

#include "bench_util.h"
#include "zt/core/random.h"
#include "zt/ops/ops.h"

using namespace zt;

namespace {

void matmul_line(int64_t m, int64_t k, int64_t n, DType dt, bool fallback) {
  Tensor a = bench::uniform({m, k}, dt), b = bench::uniform({k, n}, dt);
  ops::set_matmul_lowp_fallback_for_testing(fallback);
  const double s = bench::seconds_per_call([&] { ops::matmul(a, b); });
  ops::set_matmul_lowp_fallback_for_testing(false);
  const char* path = dt == DType::f32 ? "f32" : (fallback || !ops::matmul_native(dt) ? "f32_fallback" : "onednn_lowp");
  std::printf("{\"op\":\"matmul\",\"shape\":\"%ldx%ld@%ldx%ld\",\"dtype\":\"%s\",\"path\":\"%s\",\"gflops\":%.2f}\n",
              long(m), long(k), long(k), long(n), dtype_name(dt), path, 2.0 * double(m * k * n) / s / 1e9);
}

void buffer_line(const char* op, DType dst, DType src, int64_t n) {
  Tensor d = bench::uniform({n}, dst), s = bench::uniform({n}, src);
  double sec = 0;
  double bytes = double(n) * double(dtype_size(src));
  if (std::string(op) == "cast_into") {
    sec = bench::seconds_per_call([&] { ops::cast_into(d, s); });
    bytes += double(n) * double(dtype_size(dst));
  } else if (std::string(op) == "axpy_") {
    sec = bench::seconds_per_call([&] { ops::axpy_(d, 1e-3f, s); });
    bytes += 2.0 * double(n) * double(dtype_size(dst));
  } else {
    sec = bench::seconds_per_call([&] { (void)ops::sum_of_squares(s); });
  }
  std::printf("{\"op\":\"%s\",\"n\":%ld,\"dst\":\"%s\",\"src\":\"%s\",\"gbps\":%.2f}\n", op, long(n), dtype_name(dst),
              dtype_name(src), bytes / sec / 1e9);
}

}  // namespace

int main(int argc, char** argv) {
  // Shapes given as MxKxN (the GPT benchmarks' layers): f32 and bf16 only, on bf16's best path.
  if (argc > 1) {
    for (int i = 1; i < argc; ++i) {
      long m = 0, k = 0, n = 0;
      if (std::sscanf(argv[i], "%ldx%ldx%ld", &m, &k, &n) != 3 || m <= 0 || k <= 0 || n <= 0) {
        std::fprintf(stderr, "usage: zt_bench_matmul [MxKxN ...]\n");
        return 2;
      }
      matmul_line(m, k, n, DType::f32, false);
      matmul_line(m, k, n, DType::bf16, !ops::matmul_native(DType::bf16));
    }
    return 0;
  }
  for (auto [m, k, n] : {std::tuple<int64_t, int64_t, int64_t>{64, 784, 256}, {1024, 1024, 1024}}) {
    matmul_line(m, k, n, DType::f32, false);
    for (DType dt : {DType::bf16, DType::f16}) {
      if (ops::matmul_native(dt)) matmul_line(m, k, n, dt, false);
      matmul_line(m, k, n, dt, true);
    }
  }
  const int64_t n = int64_t(1) << 24;
  buffer_line("cast_into", DType::bf16, DType::f32, n);
  buffer_line("cast_into", DType::f32, DType::f16, n);
  buffer_line("axpy_", DType::f32, DType::bf16, n);
  buffer_line("axpy_", DType::bf16, DType::bf16, n);
  buffer_line("sum_of_squares", DType::f32, DType::bf16, n);
}
