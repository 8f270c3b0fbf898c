// Flash-style attention (ops::attention, ag::attention): PyTorch goldens, a naive reference over
// several blocks, both backward schedules, finite differences, padding, and memory that never
// holds a T x T matrix.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <limits>

#include "../common/source_dir.h"
#include "op_table.h"
#include "zt/autograd/autograd.h"
#include "zt/autograd/layers.h"
#include "zt/core/parallel.h"
#include "zt/core/random.h"
#include "zt/ops/ops.h"
#include "zt/ops/transformer.h"

namespace zt::test {
namespace {

struct Case {
  int64_t B, T, C, H;
  bool causal;
};

std::vector<float> randn(int64_t n, uint64_t seed) {
  Generator g(seed);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = g.normal(0.f, 1.f);
  return v;
}

Tensor qkv_of(const Case& c, uint64_t seed, DType dt = DType::f32) {
  return Tensor::from_vector(randn(c.B * c.T * 3 * c.C, seed), {c.B, c.T, 3 * c.C}, dt);
}
Tensor dout_of(const Case& c, uint64_t seed, DType dt = DType::f32) {
  return Tensor::from_vector(randn(c.B * c.T * c.C, seed), {c.B, c.T, c.C}, dt);
}

// 1 = key visible, 0 = padding: a random 20% of keys, plus sequence 1 (if any) all padding.
Tensor random_mask(const Case& c, uint64_t seed) {
  Generator g(seed);
  std::vector<int32_t> m(static_cast<size_t>(c.B * c.T));
  for (int64_t i = 0; i < c.B * c.T; ++i) m[size_t(i)] = (i / c.T == 1) ? 0 : g.uniform01() >= 0.2;
  return Tensor::from_ints(m, {c.B, c.T});
}

// Naive attention in double, one query at a time (O(T) memory): out, lse and dqkv.
struct Reference {
  std::vector<double> out, lse, dqkv;
};
Reference naive(const Case& c, const Tensor& qkv_t, const Tensor& dout_t, const Tensor* mask_t) {
  const auto x = qkv_t.to_vector(), dy = dout_t.to_vector();
  const std::vector<float> mask = mask_t ? mask_t->to_vector() : std::vector<float>();
  const int64_t D = c.C / c.H, ld = 3 * c.C;
  const double scale = 1.0 / std::sqrt(double(D));
  Reference r{std::vector<double>(size_t(c.B * c.T * c.C)), std::vector<double>(size_t(c.B * c.H * c.T)),
              std::vector<double>(x.size())};
  auto at = [&](int64_t b, int64_t t, int64_t part, int64_t h) {
    return size_t((b * c.T + t) * ld + part * c.C + h * D);
  };
  std::vector<double> s(size_t(c.T)), dp(size_t(c.T));
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t h = 0; h < c.H; ++h)
      for (int64_t i = 0; i < c.T; ++i) {
        double m = -INFINITY;
        for (int64_t j = 0; j < c.T; ++j) {
          const bool vis = (!c.causal || j <= i) && (mask.empty() || mask[size_t(b * c.T + j)] != 0);
          double dot = 0;
          for (int64_t d = 0; d < D; ++d) dot += double(x[at(b, i, 0, h) + d]) * x[at(b, j, 1, h) + d];
          s[size_t(j)] = vis ? dot * scale : -INFINITY;
          m = std::max(m, s[size_t(j)]);
        }
        double& lse = r.lse[size_t((b * c.H + h) * c.T + i)];
        if (m == -INFINITY) {
          lse = -INFINITY;
          continue;
        }
        double l = 0;
        for (int64_t j = 0; j < c.T; ++j) l += (s[size_t(j)] = std::exp(s[size_t(j)] - m));
        lse = m + std::log(l);
        const size_t o = size_t((b * c.T + i) * c.C + h * D);
        double dsum = 0;
        for (int64_t j = 0; j < c.T; ++j) {
          double& p = s[size_t(j)];
          p /= l;
          dp[size_t(j)] = 0;
          for (int64_t d = 0; d < D; ++d) {
            r.out[o + size_t(d)] += p * x[at(b, j, 2, h) + d];
            dp[size_t(j)] += double(dy[o + size_t(d)]) * x[at(b, j, 2, h) + d];
          }
          dsum += p * dp[size_t(j)];
        }
        for (int64_t j = 0; j < c.T; ++j) {
          const double p = s[size_t(j)], ds = p * (dp[size_t(j)] - dsum) * scale;
          for (int64_t d = 0; d < D; ++d) {
            r.dqkv[at(b, i, 0, h) + d] += ds * x[at(b, j, 1, h) + d];
            r.dqkv[at(b, j, 1, h) + d] += ds * x[at(b, i, 0, h) + d];
            r.dqkv[at(b, j, 2, h) + d] += p * dy[o + size_t(d)];
          }
        }
      }
  return r;
}

void expect_near_all(const Tensor& got, const std::vector<double>& want, double rtol, const std::string& what) {
  const auto g = got.to_vector();
  ASSERT_EQ(g.size(), want.size()) << what;
  double scale = 0;
  for (double w : want) scale = std::isfinite(w) ? std::max(scale, std::fabs(w)) : scale;
  int bad = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    const bool ok = std::isinf(want[i]) ? g[i] == want[i] : std::fabs(g[i] - want[i]) <= rtol * (scale + 1e-30);
    if (!ok && bad++ < 5) ADD_FAILURE() << what << "[" << i << "]: got " << g[i] << ", want " << want[i];
  }
}

// Resets the OpenMP thread count when a test that changed it ends.
struct ThreadsScope {
  explicit ThreadsScope(int n) : saved(num_threads()) { set_num_threads(n); }
  ~ThreadsScope() { set_num_threads(saved); }
  int saved;
};

TEST(Attention, MatchesPyTorchGoldensForwardAndBackward) {
  std::ifstream f(testing_util::source_dir() + "/tests/golden/attention.json");
  ASSERT_TRUE(f.good()) << "missing fixture; run tests/golden/gen_golden_attention.py";
  const json doc = json::parse(f);
  ASSERT_GT(doc["cases"].size(), 0u);
  for (const json& c : doc["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>() + " (" + c["dtype"].get<std::string>() + ")");
    const DType dt = dtype_from_name(c["dtype"]);
    const int64_t B = c["B"], T = c["T"], C = c["C"], H = c["n_head"], K = c.value("n_kv_head", H);
    const int64_t W = C + 2 * K * (C / H);  // grouped-query cases carry n_kv_head
    Tensor qkv = Tensor::from_vector(c["qkv"].get<std::vector<float>>(), {B, T, W}, dt);
    Tensor mask =
        c["key_mask"].is_null() ? Tensor() : Tensor::from_ints(c["key_mask"].get<std::vector<int32_t>>(), {B, T});
    autograd::set_requires_grad(qkv, true);
    Tensor out = ag::attention(qkv, H, c["causal"], mask.defined() ? &mask : nullptr, K);
    EXPECT_EQ(out.dtype(), dt);
    // bf16 is loose: the saved 16-bit out feeds D_i = dO . O in backward.
    const Tolerance tol{1e-5f, 2e-2f, 2e-3f};
    expect_close(out, {{"shape", Shape{B, T, C}}, {"data", c["out"]}}, tol.of(dt), "out");
    autograd::backward(out, Tensor::from_vector(c["dout"].get<std::vector<float>>(), {B, T, C}, dt));
    Tensor g = autograd::grad(qkv);
    EXPECT_EQ(g.dtype(), dt);
    expect_close(g, {{"shape", Shape{B, T, W}}, {"data", c["dqkv"]}}, tol.of(dt), "dqkv");
  }
}

// T spanning several blocks (a partial last one, and an exact multiple), causal or not, padding.
TEST(Attention, BlockedMatchesNaiveReferenceOverSeveralBlocks) {
  for (const Case& c :
       {Case{2, 200, 48, 3, true}, Case{2, 200, 48, 3, false}, Case{1, 128, 16, 2, true}, Case{3, 77, 24, 1, false}}) {
    for (bool masked : {false, true}) {
      SCOPED_TRACE("T=" + std::to_string(c.T) + " causal=" + std::to_string(c.causal) +
                   " mask=" + std::to_string(masked));
      Tensor qkv = qkv_of(c, 1), dout = dout_of(c, 2), mask = random_mask(c, 3);
      const Tensor* pm = masked ? &mask : nullptr;
      const auto r = ops::attention(qkv, c.H, c.causal, pm);
      const Reference want = naive(c, qkv, dout, pm);
      expect_near_all(r.out, want.out, 2e-6, "out");
      expect_near_all(r.lse, want.lse, 2e-6, "lse");
      expect_near_all(ops::attention_backward(dout, qkv, r, c.H, c.causal, pm), want.dqkv, 2e-6, "dqkv");
    }
  }
}

// Backward runs one item per head when there are at least as many heads as threads, else items
// per key block and per query block: both give the same bits (and forward does at any count).
TEST(Attention, BothBackwardSchedulesGiveTheSameBits) {
  const Case c{1, 200, 32, 2, true};  // B * H = 2 heads
  Tensor qkv = qkv_of(c, 4, DType::bf16), dout = dout_of(c, 5, DType::bf16), mask = random_mask(c, 6);
  std::vector<std::vector<float>> outs, grads;
  for (int threads : {1, 2, 4}) {  // per head, per head, per block
    ThreadsScope scope(threads);
    const auto r = ops::attention(qkv, c.H, c.causal, &mask);
    outs.push_back(r.out.to_vector());
    grads.push_back(ops::attention_backward(dout, qkv, r, c.H, c.causal, &mask).to_vector());
  }
  for (size_t i = 1; i < outs.size(); ++i) {
    EXPECT_EQ(outs[i], outs[0]) << "forward with thread setting " << i;
    EXPECT_EQ(grads[i], grads[0]) << "backward with thread setting " << i;
  }
  const Reference want = naive(c, qkv, dout, &mask);
  expect_near_all(Tensor::from_vector(grads[2], {c.B, c.T, 3 * c.C}), want.dqkv, 2e-2, "dqkv bf16");
}

// Every backend (cpu, sim, and cuda where a GPU is present) against the naive reference in every
// dtype, over head sizes 16, 32, 64 and 128 (on a GPU, 16-bit ones take the tensor-core tiles,
// Note [tensor-core attention]), lengths that leave a partial last tile, causal or padded keys.
TEST(Attention, EveryBackendMatchesTheNaiveReference) {
  for (const Case& c : {Case{2, 200, 128, 2, true}, Case{2, 130, 64, 2, false}, Case{1, 70, 48, 3, true},
                        Case{1, 100, 256, 2, false}})
    for (DType dt : {DType::f32, DType::bf16, DType::f16})
      for (const std::string& b : ops::backends()) {
        if (!backend_present(b)) continue;
        const bool masked = !c.causal;
        SCOPED_TRACE(b + " " + dtype_name(dt) + " T=" + std::to_string(c.T) + " D=" + std::to_string(c.C / c.H));
        const Tensor qkv = qkv_of(c, 7, dt), dout = dout_of(c, 8, dt), mask = random_mask(c, 9);
        const Reference want = naive(c, qkv, dout, masked ? &mask : nullptr);
        const Tensor mask_b = on_backend(mask, b);
        const auto r = ops::attention(on_backend(qkv, b), c.H, c.causal, masked ? &mask_b : nullptr);
        const Tensor dqkv =
            ops::attention_backward(on_backend(dout, b), on_backend(qkv, b), r, c.H, c.causal, masked ? &mask_b : nullptr);
        const double tol = dt == DType::f32 ? 2e-5 : 2e-2;  // 16-bit: out and P round to 8 or 11 bits
        expect_near_all(r.out.to(Device::cpu()), want.out, tol, "out");
        expect_near_all(r.lse.to(Device::cpu()), want.lse, tol, "lse");
        expect_near_all(dqkv.to(Device::cpu()), want.dqkv, 2 * tol, "dqkv");
      }
}

// L = sum(attention(x) * R): analytic gradient against central differences, in f32.
TEST(Attention, GradientMatchesFiniteDifferences) {
  for (const Case& c : {Case{2, 6, 8, 2, true}, Case{1, 5, 6, 1, false}}) {
    Tensor mask = Tensor::from_ints({1, 0, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1}, {2, 6});
    const Tensor* pm = c.B == 2 ? &mask : nullptr;
    Tensor x = qkv_of(c, 7);
    const auto r = randn(c.B * c.T * c.C, 8);
    autograd::set_requires_grad(x, true);
    autograd::backward(ag::attention(x, c.H, c.causal, pm), Tensor::from_vector(r, {c.B, c.T, c.C}));
    const auto analytic = autograd::grad(x).to_vector();
    auto loss = [&] {
      autograd::NoGradGuard ng;
      const auto y = ops::attention(x, c.H, c.causal, pm).out.to_vector();
      double s = 0;
      for (size_t i = 0; i < y.size(); ++i) s += double(y[i]) * r[i];
      return s;
    };
    float* p = x.data<float>();
    const float eps = 1e-2f;
    for (int64_t i = 0; i < x.numel(); ++i) {
      const float orig = p[i];
      p[i] = orig + eps;
      const double lp = loss();
      p[i] = orig - eps;
      const double lm = loss();
      p[i] = orig;
      const double num = (lp - lm) / (2.0 * eps);
      EXPECT_NEAR(analytic[size_t(i)], num, 1e-2 * std::fabs(num) + 2e-3) << "element " << i;
    }
  }
}

// A query that sees no key outputs exactly 0 with lse -inf; padded keys and such queries get
// exactly zero gradient.
TEST(Attention, QueriesWithoutVisibleKeysGiveZeroAndNoGradient) {
  const Case c{2, 70, 8, 2, true};
  std::vector<int32_t> m(size_t(c.B * c.T), 1);
  m[0] = 0;                                                        // query 0 of sequence 0 sees nothing
  for (int64_t t = 0; t < c.T; ++t) m[size_t(c.T + t)] = t >= 66;  // sequence 1: keys 66.. only
  Tensor mask = Tensor::from_ints(m, {c.B, c.T}), qkv = qkv_of(c, 9), dout = dout_of(c, 10);
  const auto r = ops::attention(qkv, c.H, c.causal, &mask);
  const auto out = r.out.to_vector(), lse = r.lse.to_vector();
  const auto g = ops::attention_backward(dout, qkv, r, c.H, c.causal, &mask).to_vector();
  auto empty = [&](int64_t b, int64_t t) { return (b == 0 && t == 0) || (b == 1 && t < 66); };
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t t = 0; t < c.T; ++t) {
      const bool none = empty(b, t), padded = m[size_t(b * c.T + t)] == 0;
      for (int64_t h = 0; h < c.H; ++h) EXPECT_EQ(std::isinf(lse[size_t((b * c.H + h) * c.T + t)]), none);
      for (int64_t k = 0; k < c.C; ++k) {
        const size_t row = size_t((b * c.T + t) * 3 * c.C);
        const float want_out = none ? 0.f : out[size_t((b * c.T + t) * c.C + k)];
        const float dq = none ? 0.f : g[row + size_t(k)];
        const float dk = padded ? 0.f : g[row + size_t(c.C + k)], dv = padded ? 0.f : g[row + size_t(2 * c.C + k)];
        EXPECT_EQ(out[size_t((b * c.T + t) * c.C + k)], want_out) << b << "," << t;
        EXPECT_EQ(g[row + size_t(k)], dq) << "dq " << b << "," << t;
        EXPECT_EQ(g[row + size_t(c.C + k)], dk) << "dk " << b << "," << t;
        EXPECT_EQ(g[row + size_t(2 * c.C + k)], dv) << "dv " << b << "," << t;
      }
    }
  EXPECT_NE(out[size_t((c.T + 66) * c.C)], 0.f);  // query 66 of sequence 1 sees key 66
}

// T = 1024: forward + backward allocate the outputs plus block-sized scratch, far below one
// T x T score matrix per head.
TEST(Attention, MemoryStaysFarBelowTheScoreMatrices) {
  const Case c{1, 1024, 64, 2, true};  // D = 32
  ThreadsScope scope(2);
  Tensor qkv = qkv_of(c, 11), dout = dout_of(c, 12);
  auto& a = Allocator::global();
  a.reset_peaks();
  const size_t base = a.stats().total_current;
  size_t outputs = 0;
  {
    const auto r = ops::attention(qkv, c.H, c.causal, nullptr);
    Tensor g = ops::attention_backward(dout, qkv, r, c.H, c.causal, nullptr);
    outputs = r.out.nbytes() + r.lse.nbytes() + g.nbytes();
  }
  const size_t extra = a.stats().total_peak - base - outputs, scores = size_t(c.B * c.H * c.T * c.T) * 4;
  EXPECT_LT(extra, scores / 8) << "scratch " << extra << " bytes vs " << scores << " for the scores";
  RecordProperty("scratch_bytes", std::to_string(extra));
}

TEST(Attention, DtypesFollowQkvAndLseIsF32) {
  const Case c{1, 3, 4, 2, false};
  for (DType dt : {DType::f32, DType::bf16, DType::f16}) {
    Tensor qkv = qkv_of(c, 13, dt);
    const auto r = ops::attention(qkv, c.H, c.causal, nullptr);
    EXPECT_EQ(r.out.dtype(), dt);
    EXPECT_EQ(r.lse.dtype(), DType::f32);
    EXPECT_EQ(r.lse.shape(), (Shape{1, 2, 3}));
    EXPECT_EQ(ops::attention_backward(dout_of(c, 14, dt), qkv, r, c.H, c.causal, nullptr).dtype(), dt);
  }
  // A strided qkv view is read as its values (made contiguous first).
  Tensor wide = qkv_of(Case{1, 3, 8, 2, false}, 15);
  Tensor view = wide.slice(2, 0, 12);
  const auto a = ops::attention(view, 2, false, nullptr).out.to_vector();
  EXPECT_EQ(a, ops::attention(view.contiguous(), 2, false, nullptr).out.to_vector());
}

template <typename F>
void expect_error(F f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "expected an error containing '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(Attention, BadShapesAndMasksAreErrorsNamingTheOp) {
  const Case c{2, 4, 6, 2, false};
  Tensor qkv = qkv_of(c, 16);
  expect_error([&] { ops::attention(Tensor::zeros({2, 4, 17}), 1, false, nullptr); }, "[attention] qkv must be");
  expect_error([&] { ops::attention(qkv, 4, false, nullptr); }, "n_head 4 must divide C = 6");
  expect_error([&] { ops::attention(Tensor::from_ints({1, 2, 3}, {1, 1, 3}), 1, false, nullptr); }, "i32");
  Tensor fmask = Tensor::zeros({2, 4}), short_mask = Tensor::from_ints({1, 1, 1, 1}, {1, 4});
  expect_error([&] { ops::attention(qkv, 2, false, &fmask); }, "key_mask must be i32");
  expect_error([&] { ops::attention(qkv, 2, false, &short_mask); }, "key_mask must be [B, T]");
  const auto r = ops::attention(qkv, 2, false, nullptr);
  expect_error(
      [&] {
        ops::attention_backward(Tensor::zeros({2, 4, 7}), qkv, r, 2, false, nullptr);
      },
      "[attention_backward] dout must be");
  expect_error([&] { ops::attention_backward(dout_of(c, 1, DType::bf16), qkv, r, 2, false, nullptr); },
               "dtypes differ");
  expect_error([&] { ops::attention_backward(dout_of(c, 1), qkv, ops::AttentionResult{}, 2, false, nullptr); },
               "saved forward result is missing");
  // Empty batch or sequence: empty results, no kernel.
  EXPECT_EQ(ops::attention(Tensor::zeros({0, 4, 6}), 2, false, nullptr).out.numel(), 0);
  EXPECT_EQ(ops::attention(Tensor::zeros({2, 0, 6}), 2, true, nullptr).lse.shape(), (Shape{2, 2, 0}));
}

// The start line's words for the kernels: the CPU's own, a GPU's named (cuDNN's or the own ones
// and why, Note [cudnn attention]); heads that do not group are an error naming the op.
TEST(Attention, ThePathNamesTheKernelsOfEachBackend) {
  EXPECT_EQ(ops::attention_path(Device::cpu(), DType::bf16, 12, 4, 64, false), "own flash kernels (cpu)");
  EXPECT_EQ(ops::attention_path(Device::sim(), DType::f32, 4, 4, 16, true), "own flash kernels (cpu)");
  EXPECT_THROW(ops::attention_path(Device::cpu(), DType::f32, 12, 5, 64, false), Error);
  if (backend_present("cuda")) {
    const Device gpu = backend_device("cuda");
    EXPECT_NE(ops::attention_path(gpu, DType::bf16, 12, 12, 64, false).find("cuDNN"), std::string::npos);
    EXPECT_NE(ops::attention_path(gpu, DType::f32, 12, 12, 64, false).find("own"), std::string::npos);
  }
}

}  // namespace
}  // namespace zt::test
