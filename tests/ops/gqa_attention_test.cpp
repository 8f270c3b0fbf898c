// Grouped-query attention (ops::attention with n_kv_head < n_head) against the same attention on
// k and v repeated for each query head (Hugging Face's repeat_kv), on every backend and dtype:
// forward equal, and each kv head's gradient the sum of its repeated copies' gradients.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "op_table.h"
#include "zt/core/parallel.h"
#include "zt/core/random.h"
#include "zt/ops/ops.h"
#include "zt/ops/transformer.h"

namespace zt::test {
namespace {

struct Gqa {
  int64_t B, T, H, K, D;
  bool causal;
  int64_t width() const { return (H + 2 * K) * D; }
};

std::vector<float> randn(int64_t n, uint64_t seed) {
  Generator g(seed);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = g.normal(0.f, 1.f);
  return v;
}

// The packed [B, T, (H + 2K) D] with each kv head repeated for its H / K query heads: [B, T, 3 H D].
std::vector<float> repeat_kv(const Gqa& g, const std::vector<float>& qkv) {
  const int64_t G = g.H / g.K, W = g.width(), C = g.H * g.D;
  std::vector<float> out(static_cast<size_t>(g.B * g.T * 3 * C));
  for (int64_t r = 0; r < g.B * g.T; ++r) {
    const float* src = qkv.data() + r * W;
    float* dst = out.data() + r * 3 * C;
    for (int64_t i = 0; i < C; ++i) dst[i] = src[i];
    for (int64_t h = 0; h < g.H; ++h)
      for (int64_t d = 0; d < g.D; ++d) {
        dst[C + h * g.D + d] = src[C + (h / G) * g.D + d];
        dst[2 * C + h * g.D + d] = src[C + g.K * g.D + (h / G) * g.D + d];
      }
  }
  return out;
}

// The repeated layout's gradient folded back: each kv head's the sum over its group, in head order.
std::vector<double> fold_kv(const Gqa& g, const std::vector<float>& d3) {
  const int64_t G = g.H / g.K, W = g.width(), C = g.H * g.D;
  std::vector<double> out(static_cast<size_t>(g.B * g.T * W), 0.0);
  for (int64_t r = 0; r < g.B * g.T; ++r) {
    const float* src = d3.data() + r * 3 * C;
    double* dst = out.data() + r * W;
    for (int64_t i = 0; i < C; ++i) dst[i] = src[i];
    for (int64_t h = 0; h < g.H; ++h)
      for (int64_t d = 0; d < g.D; ++d) {
        dst[C + (h / G) * g.D + d] += src[C + h * g.D + d];
        dst[C + g.K * g.D + (h / G) * g.D + d] += src[2 * C + h * g.D + d];
      }
  }
  return out;
}

void expect_near(const std::vector<float>& got, const std::vector<double>& want, double rtol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double scale = 0;
  for (double w : want) scale = std::max(scale, std::abs(w));
  int bad = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (std::abs(double(got[i]) - want[i]) > rtol * (std::abs(want[i]) + scale) && bad++ < 5)
      ADD_FAILURE() << what << "[" << i << "]: got " << got[i] << ", want " << want[i];
}

TEST(GqaAttention, EqualsAttentionOnRepeatedKeysAndValuesOnEveryBackend) {
  for (const Gqa& g : {Gqa{2, 70, 4, 2, 16, true}, Gqa{1, 33, 6, 1, 8, false}, Gqa{2, 130, 8, 2, 64, true}})
    for (DType dt : {DType::f32, DType::bf16, DType::f16})
      for (const std::string& b : ops::backends()) {
        if (!backend_present(b)) continue;
        SCOPED_TRACE(b + " " + dtype_name(dt) + " H=" + std::to_string(g.H) + " K=" + std::to_string(g.K) +
                     " T=" + std::to_string(g.T));
        // Inputs rounded to dt first, so both sides see the same values.
        const Tensor packed = Tensor::from_vector(randn(g.B * g.T * g.width(), 11), {g.B, g.T, g.width()}, dt);
        const Tensor dout = Tensor::from_vector(randn(g.B * g.T * g.H * g.D, 12), {g.B, g.T, g.H * g.D}, dt);
        const std::vector<float> packed_values = packed.to_vector();
        const Tensor repeated = Tensor::from_vector(repeat_kv(g, packed_values), {g.B, g.T, 3 * g.H * g.D}, dt);
        const Tensor mask = Tensor::from_ints(std::vector<int32_t>(size_t(g.B * g.T), 1), {g.B, g.T});
        const Tensor* pm = g.causal ? nullptr : &mask;
        const auto want = ops::attention(repeated, g.H, g.causal, pm);
        const std::vector<float> want_dqkv =
            ops::attention_backward(dout, repeated, want, g.H, g.causal, pm).to_vector();
        const Tensor pmask = on_backend(mask, b);
        const auto got = ops::attention(on_backend(packed, b), g.H, g.causal, g.causal ? nullptr : &pmask, g.K);
        const Tensor dqkv = ops::attention_backward(on_backend(dout, b), on_backend(packed, b), got, g.H, g.causal,
                                                    g.causal ? nullptr : &pmask, g.K);
        const double tol = dt == DType::f32 ? 1e-5 : dt == DType::bf16 ? 2e-2 : 3e-3;
        const std::vector<float> w = want.out.to_vector();
        expect_near(got.out.to(Device::cpu()).to_vector(), std::vector<double>(w.begin(), w.end()), tol, "out");
        expect_near(dqkv.to(Device::cpu()).to_vector(), fold_kv(g, want_dqkv), tol, "dqkv");
      }
}

// One backend's 16-bit attention of g (key mask or null) against the cpu's f32 result on the
// repeated layout, the backward run twice for the same bits; returns the dqkv it gave.
std::vector<float> expect_cpu_values_twice(const Gqa& g, DType dt, const std::string& b, const Tensor* mask,
                                           uint64_t seed) {
  const Tensor packed = Tensor::from_vector(randn(g.B * g.T * g.width(), seed), {g.B, g.T, g.width()}, dt);
  const Tensor dout = Tensor::from_vector(randn(g.B * g.T * g.H * g.D, seed + 1), {g.B, g.T, g.H * g.D}, dt);
  const Tensor repeated = Tensor::from_vector(repeat_kv(g, packed.to_vector()), {g.B, g.T, 3 * g.H * g.D}, DType::f32);
  const auto want = ops::attention(repeated, g.H, g.causal, mask);
  const std::vector<float> want_dqkv =
      ops::attention_backward(dout.to(DType::f32), repeated, want, g.H, g.causal, mask).to_vector();
  const Tensor q = on_backend(packed, b), dy = on_backend(dout, b);
  const Tensor m = mask ? on_backend(*mask, b) : Tensor();
  const Tensor* pm = mask ? &m : nullptr;
  const auto got = ops::attention(q, g.H, g.causal, pm, g.K);
  const Tensor d1 = ops::attention_backward(dy, q, got, g.H, g.causal, pm, g.K);
  const Tensor d2 = ops::attention_backward(dy, q, got, g.H, g.causal, pm, g.K);
  const double tol = dt == DType::bf16 ? 2e-2 : 3e-3;
  const std::vector<float> w = want.out.to_vector();
  expect_near(got.out.to(Device::cpu()).to_vector(), std::vector<double>(w.begin(), w.end()), tol, "out");
  const std::vector<float> g1 = d1.to(Device::cpu()).to_vector();
  expect_near(g1, fold_kv(g, want_dqkv), tol, "dqkv");
  EXPECT_EQ(d2.to(Device::cpu()).to_vector(), g1) << "a second backward gave other bits";
  return g1;
}

// 16-bit heads of 64 without a key mask, causal or not, grouped or not: the calls cuDNN's fused
// attention takes on a GPU (Note [cudnn attention]; T = 192 is its Hopper tail case). Against the
// cpu's f32 result on the repeated layout, and the backward twice the same bits (determinism).
TEST(GqaAttention, EveryBackendGivesUnmaskedSixteenBitHeadsTheSameBitsTwice) {
  for (const Gqa& g : {Gqa{2, 256, 8, 2, 64, true}, Gqa{1, 256, 4, 4, 64, false}, Gqa{1, 192, 6, 2, 64, false}})
    for (DType dt : {DType::bf16, DType::f16})
      for (const std::string& b : ops::backends()) {
        if (!backend_present(b)) continue;
        SCOPED_TRACE(b + " " + dtype_name(dt) + " H=" + std::to_string(g.H) + " K=" + std::to_string(g.K) +
                     " T=" + std::to_string(g.T) + (g.causal ? " causal" : ""));
        expect_cpu_values_twice(g, dt, b, nullptr, 31);
      }
}

// Key masks per sequence: right padding, none padded, holes, left padding, all padding. On a GPU,
// 16-bit heads of 64 take cuDNN's padding mask for the first two and the own kernels redo the
// others (Note [cudnn padding mask]); on every backend the values are the cpu's f32 ones on the
// repeated layout (causal or not, grouped or not), padded keys' gradients zero, and the backward
// twice the same bits. scripts/gpu_check.sh fails where cuDNN refused these graphs.
TEST(GqaAttention, EveryBackendGivesKeyMaskedSixteenBitHeadsTheCpuValues) {
  const int64_t T = 256;
  std::vector<int32_t> flags(size_t(5 * T), 0);  // the fifth sequence all padding
  for (int64_t j = 0; j < T; ++j) {
    flags[size_t(j)] = j < 200;             // right padding
    flags[size_t(T + j)] = 1;               // none
    flags[size_t(2 * T + j)] = j % 7 != 3;  // holes
    flags[size_t(3 * T + j)] = j >= 56;     // left padding
  }
  for (const Gqa& g : {Gqa{5, T, 8, 2, 64, false}, Gqa{5, T, 4, 4, 64, true}, Gqa{5, T, 8, 2, 64, true}})
    for (DType dt : {DType::bf16, DType::f16})
      for (const std::string& b : ops::backends()) {
        if (!backend_present(b)) continue;
        SCOPED_TRACE(b + " " + dtype_name(dt) + " H=" + std::to_string(g.H) + " K=" + std::to_string(g.K) +
                     (g.causal ? " causal" : ""));
        const Tensor mask = Tensor::from_ints(flags, {g.B, g.T});
        const std::vector<float> g1 = expect_cpu_values_twice(g, dt, b, &mask, 41);
        // The first sequence's padded keys (200 on): their dK and dV exactly zero.
        for (int64_t t = 200; t < T; ++t)
          for (int64_t c = g.H * g.D; c < g.width(); ++c)
            ASSERT_EQ(g1[size_t(t * g.width() + c)], 0.f) << "padded key " << t << ", column " << c;
      }
}

// Both backward schedules (a kv head per work item, or key and query blocks) give the same bits.
TEST(GqaAttention, BothBackwardSchedulesGiveTheSameBits) {
  const Gqa g{1, 200, 4, 2, 32, true};  // B * K = 2 kv heads
  const Tensor qkv = Tensor::from_vector(randn(g.B * g.T * g.width(), 21), {g.B, g.T, g.width()}, DType::bf16);
  const Tensor dout = Tensor::from_vector(randn(g.B * g.T * g.H * g.D, 22), {g.B, g.T, g.H * g.D}, DType::bf16);
  const int saved = num_threads();
  std::vector<std::vector<float>> grads;
  for (int threads : {1, 2, 4}) {
    set_num_threads(threads);
    const auto r = ops::attention(qkv, g.H, g.causal, nullptr, g.K);
    grads.push_back(ops::attention_backward(dout, qkv, r, g.H, g.causal, nullptr, g.K).to_vector());
  }
  set_num_threads(saved);
  for (size_t i = 1; i < grads.size(); ++i) EXPECT_EQ(grads[i], grads[0]) << "thread setting " << i;
}

TEST(GqaAttention, AKeyValueHeadCountThatDoesNotDivideTheHeadsIsAnError) {
  const Tensor qkv = Tensor::zeros({1, 2, 7 * 4});
  try {
    ops::attention(qkv, 3, true, nullptr, 2);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[attention] n_kv_head 2 must divide n_head 3"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace zt::test
