// Layer norm forward + backward (ms, GB/s) at the GPT benchmarks' shapes, the residual sum fused
// with the norm both ways (against add, norm, add of dx), the MLP's bias + GELU
// backward at rows x 4C (fused against gelu_backward + sum over rows), the classifier's loss and
// gradient at rows x GPT-2's vocabulary (one pass against two, Note [one-pass classifier]), and
// memcpy GB/s (the memory-bandwidth ceiling that AdamW's update and the shared-memory collectives
// are read against).
// usage: zt_bench_kernels [ROWSxC ...]   (default 2048x192 1024x768); prints JSON lines.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench_util.h"
#include "zt/core/parallel.h"
#include "zt/core/random.h"
#include "zt/ops/ops.h"
#include "zt/ops/transformer.h"

using namespace zt;

namespace {

void layer_norm_line(int64_t rows, int64_t C, DType dt) {
  Tensor x = bench::uniform({rows, C}, dt, 1), dy = bench::uniform({rows, C}, dt, 2);
  Tensor gamma = bench::uniform({C}, dt, 3), beta = bench::uniform({C}, dt, 4);
  ops::LayerNormResult r;
  const double fwd = bench::ms_per_call([&] { r = ops::layer_norm(x, gamma, beta, 1e-5f); });
  const double bwd = bench::ms_per_call([&] { (void)ops::layer_norm_backward(dy, x, gamma, r); });
  // Bytes a kernel must move at least: forward reads x, writes y; backward reads dy, x, writes dx.
  const double bytes = double(rows * C) * double(dtype_size(dt));
  std::printf(
      "{\"op\":\"layer_norm\",\"rows\":%ld,\"C\":%ld,\"dtype\":\"%s\",\"threads\":%d,\"fwd_ms\":%.3f,\"bwd_ms\":%.3f,"
      "\"fwd_bwd_ms\":%.3f,\"fwd_gbps\":%.2f,\"bwd_gbps\":%.2f}\n",
      long(rows), long(C), dtype_name(dt), num_threads(), fwd, bwd, fwd + bwd, 2 * bytes / fwd / 1e6,
      3 * bytes / bwd / 1e6);
  std::fflush(stdout);
}

// A pre-norm block's residual sum and its norm, forward then backward with the residual's gradient
// already in the sum's slot: fused (Note [fused residual norms]) against add, norm, and an add of dx.
void residual_norm_line(int64_t rows, int64_t C, DType dt) {
  Tensor x = bench::uniform({rows, C}, dt, 1), r = bench::uniform({rows, C}, dt, 2), dy = bench::uniform({rows, C}, dt, 3);
  Tensor gamma = bench::uniform({C}, dt, 4), beta = bench::uniform({C}, dt, 5);
  Tensor slot = bench::uniform({rows, C}, dt, 6);
  const double fused = bench::ms_per_call([&] {
    const ops::LayerNormResult f = ops::layer_norm(x, gamma, beta, 1e-5f, &r);
    (void)ops::layer_norm_backward(dy, f.sum, gamma, f, &slot, /*accumulate=*/true);
  });
  const double unfused = bench::ms_per_call([&] {
    const Tensor sum = ops::add(x, r);
    const ops::LayerNormResult f = ops::layer_norm(sum, gamma, beta, 1e-5f);
    ops::add_(slot, ops::layer_norm_backward(dy, sum, gamma, f).dx);
  });
  // At least: read x, r; write sum, y; read dy, sum, the slot; write the slot.
  const double bytes = 8 * double(rows * C) * double(dtype_size(dt));
  std::printf(
      "{\"op\":\"residual_norm\",\"rows\":%ld,\"C\":%ld,\"dtype\":\"%s\",\"threads\":%d,\"fused_ms\":%.3f,"
      "\"unfused_ms\":%.3f,\"speedup\":%.2f,\"fused_gbps\":%.2f}\n",
      long(rows), long(C), dtype_name(dt), num_threads(), fused, unfused, unfused / fused, bytes / fused / 1e6);
  std::fflush(stdout);
}

// The backward of gelu(h), h = x w^T + b, before the two products: dh and db (Note [fused bias-gelu]).
void bias_gelu_line(int64_t rows, int64_t C, DType dt) {
  Tensor h = bench::uniform({rows, C}, dt, 5), dy = bench::uniform({rows, C}, dt, 6);
  const double fused = bench::ms_per_call([&] { (void)ops::gelu_bias_backward(dy, h); });
  const double unfused = bench::ms_per_call([&] { (void)ops::sum(ops::gelu_backward(dy, h), 0, false); });
  // At least: read dy and h, write dh.
  const double bytes = 3 * double(rows * C) * double(dtype_size(dt));
  std::printf(
      "{\"op\":\"bias_gelu_backward\",\"rows\":%ld,\"C\":%ld,\"dtype\":\"%s\",\"threads\":%d,\"fused_ms\":%.3f,"
      "\"unfused_ms\":%.3f,\"speedup\":%.2f,\"fused_gbps\":%.2f}\n",
      long(rows), long(C), dtype_name(dt), num_threads(), fused, unfused, unfused / fused, bytes / fused / 1e6);
  std::fflush(stdout);
}

// Cross-entropy's loss and logits gradient: the forward writing it (one pass) against the forward
// then the backward (two), the gradient's dloss 1 either way.
void classifier_line(int64_t rows, int64_t vocab, DType dt) {
  Tensor logits = bench::uniform({rows, vocab}, dt, 7);
  std::vector<int32_t> t(static_cast<size_t>(rows));
  for (int64_t i = 0; i < rows; ++i) t[size_t(i)] = int32_t((i * 7919) % vocab);
  const Tensor targets = Tensor::from_ints(t, {rows});
  const double one = bench::ms_per_call([&] { (void)ops::cross_entropy(logits, targets, -100, true); });
  const double two = bench::ms_per_call([&] {
    const ops::CrossEntropyResult r = ops::cross_entropy(logits, targets);
    (void)ops::cross_entropy_backward(1.f, r, targets, -100);
  });
  const double bytes = 2 * double(rows * vocab) * double(dtype_size(dt));  // at least: read logits, write dlogits
  std::printf(
      "{\"op\":\"classifier\",\"rows\":%ld,\"vocab\":%ld,\"dtype\":\"%s\",\"threads\":%d,\"one_pass_ms\":%.3f,"
      "\"two_pass_ms\":%.3f,\"speedup\":%.2f,\"one_pass_gbps\":%.2f}\n",
      long(rows), long(vocab), dtype_name(dt), num_threads(), one, two, two / one, bytes / one / 1e6);
  std::fflush(stdout);
}

// GB/s = bytes read + bytes written, split over the threads as the kernels split their loops.
void memcpy_line(int64_t mib, int threads) {
  const size_t n = size_t(mib) << 20;
  std::vector<char> src(n, 1), dst(n, 0);
  const int saved = num_threads();
  set_num_threads(threads);
  const double ms = bench::ms_per_call([&] {
    parallel_for(int64_t(n), std::max<int64_t>(1 << 20, (int64_t(n) + threads - 1) / threads),
                 [&](int64_t b, int64_t e) { std::memcpy(dst.data() + b, src.data() + b, size_t(e - b)); });
  });
  set_num_threads(saved);
  std::printf("{\"op\":\"memcpy\",\"bytes\":%zu,\"threads\":%d,\"ms\":%.4f,\"gbps\":%.2f,\"copy_GBps\":%.2f}\n", n,
              threads, ms, 2.0 * double(n) / ms / 1e6, double(n) / ms / 1e6);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::pair<int64_t, int64_t>> shapes;
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    const size_t x = s.find('x');
    if (x == std::string::npos) {
      std::fprintf(stderr, "usage: zt_bench_kernels [ROWSxC ...]\n");
      return 2;
    }
    shapes.emplace_back(std::atoll(s.substr(0, x).c_str()), std::atoll(s.substr(x + 1).c_str()));
  }
  if (shapes.empty()) shapes = {{2048, 192}, {1024, 768}};
  for (auto [rows, C] : shapes)
    for (DType dt : {DType::f32, DType::bf16}) layer_norm_line(rows, C, dt);
  for (auto [rows, C] : shapes)
    for (DType dt : {DType::f32, DType::bf16}) residual_norm_line(rows, C, dt);
  for (auto [rows, C] : shapes)  // the MLP's hidden width
    for (DType dt : {DType::f32, DType::bf16}) bias_gelu_line(rows, 4 * C, dt);
  for (DType dt : {DType::f32, DType::bf16}) classifier_line(512, 50257, dt);
  for (int64_t mib : {1, 16, 128}) {
    memcpy_line(mib, 1);
    if (num_threads() > 1) memcpy_line(mib, num_threads());
  }
}
