// Matmul throughput (GFLOP/s) through zt::ops::matmul, f32 and bf16; prints JSON lines.
#include <chrono>
#include <cstdio>

#include "zt/core/random.h"
#include "zt/ops/ops.h"

using namespace zt;

static double gflops(int64_t m, int64_t k, int64_t n, DType dt) {
  Generator g(1);
  std::vector<float> va(size_t(m * k)), vb(size_t(k * n));
  for (auto& v : va) v = g.uniform(-1, 1);
  for (auto& v : vb) v = g.uniform(-1, 1);
  Tensor a = Tensor::from_vector(va, {m, k}, dt), b = Tensor::from_vector(vb, {k, n}, dt);
  ops::matmul(a, b);  // warm-up creates the primitive
  int iters = 0;
  auto t0 = std::chrono::steady_clock::now();
  double sec = 0;
  while (sec < 1.0) {
    ops::matmul(a, b);
    ++iters;
    sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  return 2.0 * double(m) * double(k) * double(n) * iters / sec / 1e9;
}

int main() {
  for (DType dt : {DType::f32, DType::bf16}) {
    std::printf("{\"op\":\"matmul\",\"shape\":\"64x784@784x256\",\"dtype\":\"%s\",\"gflops\":%.2f}\n", dtype_name(dt),
                gflops(64, 784, 256, dt));
    std::printf("{\"op\":\"matmul\",\"shape\":\"1024x1024@1024x1024\",\"dtype\":\"%s\",\"gflops\":%.2f}\n",
                dtype_name(dt), gflops(1024, 1024, 1024, dt));
  }
}
