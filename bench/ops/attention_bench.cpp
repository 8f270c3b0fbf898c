// Attention forward + backward time (ms) through ops::attention (flash style, blocks of keys)
// beside its peer in the same run: the unfused composition through autograd (oneDNN batched
// matmuls, a materialised [B*H, T, T] score tensor, softmax). Prints JSON lines.
// usage: zt_bench_attention [B T C H]   (default GPT-2 small-ish: 8 256 384 6)
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "bench_util.h"
#include "zt/autograd/autograd.h"
#include "zt/autograd/functions.h"
#include "zt/core/parallel.h"
#include "zt/core/random.h"
#include "zt/ops/transformer.h"

using namespace zt;

namespace {

// q, k or v of qkv as [B*H, T, D] (contiguous copies: the peer's layout).
Tensor heads(const Tensor& qkv, int64_t part, int64_t H) {
  const int64_t B = qkv.size(0), T = qkv.size(1), C = qkv.size(2) / 3, D = C / H;
  return qkv.slice(2, part * C, (part + 1) * C)
      .reshape({B, T, H, D})
      .transpose(1, 2)
      .contiguous()
      .reshape({B * H, T, D});
}

// softmax(q k^T / sqrt(D) + causal mask) v with the T x T scores in memory, forward + backward.
void unfused_step(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, float scale) {
  for (const Tensor& t : {q, k, v}) autograd::set_grad(t, Tensor());
  Tensor s = ag::add(ag::scale(ag::matmul(q, ag::transpose(k, 1, 2)), scale), mask);
  Tensor o = ag::matmul(ag::softmax(s), v);
  autograd::backward(o, Tensor::full(o.shape(), 1e-3f, o.dtype()));
}

void line(int64_t B, int64_t T, int64_t C, int64_t H, DType dt) {
  const bool causal = true;
  Tensor qkv = bench::uniform({B, T, 3 * C}, dt, 1), dout = bench::uniform({B, T, C}, dt, 2);
  ops::AttentionResult r;
  const double fwd = bench::ms_per_call([&] { r = ops::attention(qkv, H, causal, nullptr); });
  const double bwd = bench::ms_per_call([&] { (void)ops::attention_backward(dout, qkv, r, H, causal, nullptr); });
  // Block products actually run: causal skips key blocks above the diagonal (about half).
  const double D = double(C / H), pairs = double(B * H) * double(T) * double(T + 64) / 2.0;
  const double fwd_gflop = 4.0 * pairs * D / 1e9;

  Tensor q = heads(qkv, 0, H), k = heads(qkv, 1, H), v = heads(qkv, 2, H);
  for (const Tensor& t : {q, k, v}) autograd::set_requires_grad(t, true);
  std::vector<float> m(static_cast<size_t>(T * T));
  for (int64_t i = 0; i < T; ++i)
    for (int64_t j = i + 1; j < T; ++j) m[size_t(i * T + j)] = -1e9f;
  Tensor mask = Tensor::from_vector(m, {T, T}, dt);
  const double unfused = bench::ms_per_call([&] { unfused_step(q, k, v, mask, 1.f / std::sqrt(float(D))); });

  std::printf(
      "{\"op\":\"attention\",\"B\":%ld,\"T\":%ld,\"C\":%ld,\"H\":%ld,\"causal\":true,\"dtype\":\"%s\",\"threads\":%d,"
      "\"fwd_ms\":%.3f,\"bwd_ms\":%.3f,\"fwd_bwd_ms\":%.3f,\"fwd_gflops\":%.2f,\"unfused_fwd_bwd_ms\":%.3f,"
      "\"unfused_score_bytes\":%ld}\n",
      long(B), long(T), long(C), long(H), dtype_name(dt), num_threads(), fwd, bwd, fwd + bwd, fwd_gflop / (fwd / 1e3),
      unfused, long(B * H * T * T * int64_t(dtype_size(dt))));
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  int64_t B = 8, T = 256, C = 384, H = 6;
  if (argc == 5) {
    B = std::atol(argv[1]), T = std::atol(argv[2]), C = std::atol(argv[3]), H = std::atol(argv[4]);
  } else if (argc != 1) {
    std::fprintf(stderr, "usage: zt_bench_attention [B T C H]\n");
    return 2;
  }
  for (DType dt : {DType::f32, DType::bf16}) line(B, T, C, H, dt);
}
