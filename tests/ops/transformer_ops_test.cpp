// Transformer layer ops beyond the golden fixtures and gradient checks (the op table runs those):
// both sides of the parallel thresholds against plain references, results independent of the
// thread count, 16-bit results rounded once, dropout's mask statistics, and the errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "op_table.h"
#include "zt/autograd/autograd.h"
#include "zt/autograd/functions.h"
#include "zt/autograd/layers.h"
#include "zt/core/parallel.h"
#include "zt/core/random.h"
#include "zt/ops/ops.h"
#include "zt/ops/transformer.h"

namespace zt::test {
namespace {

// Runs with n OpenMP threads, restoring the count afterwards.
struct Threads {
  explicit Threads(int n) : prev(num_threads()) { set_num_threads(n); }
  ~Threads() { set_num_threads(prev); }
  int prev;
};

Tensor randn(const Shape& s, uint64_t seed, float scale = 1.f, float shift = 0.f) {
  Generator g(seed);
  std::vector<float> v(static_cast<size_t>(shape_numel(s)));
  for (auto& e : v) e = shift + scale * g.normal(0.f, 1.f);
  return Tensor::from_vector(v, s);
}

Tensor random_ids(int64_t n, int64_t v, uint64_t seed) {
  Generator g(seed);
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (auto& e : ids) e = int32_t(g.below(uint64_t(v)));
  return Tensor::from_ints(ids, {n});
}

void expect_bitwise(const Tensor& a, const Tensor& b, const std::string& what) {
  ASSERT_EQ(a.shape(), b.shape()) << what;
  ASSERT_EQ(a.dtype(), b.dtype()) << what;
  EXPECT_EQ(std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()), 0) << what << " differs bitwise";
}

void expect_near_all(const Tensor& got, const std::vector<double>& want, double tol, const std::string& what) {
  const auto g = got.to_vector();
  ASSERT_EQ(g.size(), want.size()) << what;
  int bad = 0;
  for (size_t i = 0; i < g.size(); ++i)
    if (!(std::fabs(g[i] - want[i]) <= tol * (1 + std::fabs(want[i]))) && bad++ < 5)
      ADD_FAILURE() << what << "[" << i << "]: got " << g[i] << ", want " << want[i];
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// ---- embedding ----

// Small (one thread's chunk) and large (several chunks) lookups against a plain gather, and
// the dense gradient against a serial sum in position order: bitwise, for 1 and 2 threads.
TEST(Embedding, BothSidesOfTheParallelThresholdMatchAPlainLoop) {
  const int64_t v = 50, c = 64;  // one chunk is kGrain / c = 512 ids
  for (int64_t n : {int64_t(3), int64_t(5000)}) {
    SCOPED_TRACE("ids " + std::to_string(n));
    Tensor w = randn({v, c}, 1), ids = random_ids(n, v, 2), dy = randn({n, c}, 3);
    const float* pw = w.data<float>();
    const float* pd = dy.data<float>();
    const int32_t* pi = ids.data<int32_t>();
    std::vector<float> out(size_t(n * c)), dw(size_t(v * c), 0.f);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < c; ++j) {
        out[size_t(i * c + j)] = pw[pi[i] * c + j];
        dw[size_t(pi[i] * c + j)] += pd[i * c + j];
      }
    for (int t : {1, 2}) {
      Threads th(t);
      expect_bitwise(ops::embedding(w, ids), Tensor::from_vector(out, {n, c}), "forward");
      expect_bitwise(ops::embedding_backward(dy, ids, v, DType::f32), Tensor::from_vector(dw, {v, c}), "backward");
    }
  }
}

// 1 + 300 * 2^-9 rounded once is 1.5859375 in bf16; adding in bf16 would stay at 1.
TEST(Embedding, SixteenBitGradientAccumulatesInF32AndRoundsOnce) {
  const int64_t n = 301;
  std::vector<float> dy(size_t(n) * 2, 1.f / 512.f);
  dy[0] = dy[1] = 1.f;
  Tensor g = ops::embedding_backward(Tensor::from_vector(dy, {n, 2}, DType::bf16),
                                     Tensor::from_ints(std::vector<int32_t>(size_t(n), 1), {n}), 3, DType::bf16);
  EXPECT_EQ(g.dtype(), DType::bf16);
  EXPECT_EQ(g.to_vector(), (std::vector<float>{0, 0, 1.5859375f, 1.5859375f, 0, 0}));
  // f32 gradient from f16 upstream: dtypes of dy and the gradient may differ.
  Tensor g32 = ops::embedding_backward(Tensor::from_vector(dy, {n, 2}, DType::f16),
                                       Tensor::from_ints(std::vector<int32_t>(size_t(n), 0), {n}), 1, DType::f32);
  EXPECT_FLOAT_EQ(g32.to_vector()[0], 1.5859375f);
}

// Note [row gradients]: adding the gradient into a slot at the touched rows gives the bits of the
// dense gradient added with axpy_, for every slot and gradient dtype and on every backend (repeated
// ids sum in position order; rows no id touches keep their values).
TEST(Embedding, BackwardAddEqualsTheDenseGradientAdded) {
  const int64_t v = 50, c = 7, n = 40;
  const Tensor ids = random_ids(n, v, 5), start = randn({v, c}, 6, 0.5f, 0.3f);
  for (DType dy_dt : {DType::f32, DType::bf16})
    for (DType grad : {DType::f32, DType::bf16})
      for (DType slot : {DType::f32, DType::bf16, DType::f16}) {
        const Tensor dy = ops::cast(randn({n, c}, 7), dy_dt);
        Tensor want = ops::cast(start, slot);
        ops::axpy_(want, 1.f, ops::embedding_backward(dy, ids, v, grad));
        for (const std::string& b : ops::backends())
          if (backend_present(b)) {
            Tensor got = on_backend(ops::cast(start, slot), b);
            ops::embedding_backward_add(on_backend(dy, b), on_backend(ids, b), grad, got);
            const Tensor host = got.to(Device::cpu());
            EXPECT_EQ(std::memcmp(host.raw_data(), want.raw_data(), size_t(want.nbytes())), 0)
                << b << ": dy " << dtype_name(dy_dt) << ", gradient " << dtype_name(grad) << ", slot " << dtype_name(slot);
          }
      }
  Tensor slot = Tensor::zeros({v, c});
  EXPECT_THROW(ops::embedding_backward_add(randn({1, c}, 2), Tensor::from_ints({v}, {1}), DType::f32, slot), Error);
  EXPECT_THROW(ops::embedding_backward_add(randn({1, c + 1}, 2), Tensor::from_ints({0}, {1}), DType::f32, slot), Error);
}

TEST(Embedding, IdOutsideTheTableThrowsNamingIdAndPosition) {
  Tensor w = randn({5, 3}, 1);
  const std::string msg = error_of([&] { ops::embedding(w, Tensor::from_ints({0, 4, 5, 1}, {2, 2})); });
  EXPECT_NE(msg.find("[embedding] id 5 at position 2 is outside [0, 5)"), std::string::npos) << msg;
  EXPECT_NE(error_of([&] { ops::embedding(w, Tensor::from_ints({-1}, {1})); }).find("id -1 at position 0"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              ops::embedding_backward(randn({1, 3}, 2), Tensor::from_ints({7}, {1}), 5, DType::f32);
            }).find("[embedding_backward] id 7 at position 0"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              ops::touched_rows(Tensor::from_ints({1, 9}, {2}), 5);
            }).find("id 9 at position 1"),
            std::string::npos);
  EXPECT_THROW(ops::embedding(w, Tensor::from_vector({1.f}, {1})), Error);          // ids not i32
  EXPECT_THROW(ops::embedding(randn({5}, 1), Tensor::from_ints({1}, {1})), Error);  // weight not [V, C]
  EXPECT_THROW(ops::embedding_backward(randn({3, 4}, 2), Tensor::from_ints({1, 2}, {2}), 5, DType::f32), Error);
}

// Both sides of touched_rows' branch: a row bitmap when ids are dense, a sort when sparse.
TEST(Embedding, TouchedRowsAreSortedAndDistinctOnBothPaths) {
  for (int64_t v : {int64_t(10), int64_t(100000)}) {
    Tensor ids = random_ids(40, v, 5);
    const int32_t* p = ids.data<int32_t>();
    std::set<int32_t> want(p, p + ids.numel());
    EXPECT_EQ(ops::touched_rows(ids, v), std::vector<int32_t>(want.begin(), want.end())) << "V " << v;
  }
  EXPECT_TRUE(ops::touched_rows(Tensor::from_ints({}, {0}), 7).empty());
}

TEST(Embedding, SparseWeightCollectsTheRowsItsUsesTouched) {
  Tensor w = randn({20, 3}, 1);
  autograd::set_requires_grad(w, true);
  autograd::set_sparse_grad(w, true);
  Tensor y =
      ag::add(ag::embedding(w, Tensor::from_ints({7, 2, 7}, {3})), ag::embedding(w, Tensor::from_ints({11}, {1})));
  autograd::backward(ag::sum(y));
  EXPECT_EQ(autograd::touched_rows(w), (std::vector<int32_t>{2, 7, 11}));
  const auto g = autograd::grad(w).to_vector();
  EXPECT_EQ(g[7 * 3], 2.f);
  EXPECT_EQ(g[2 * 3], 1.f);
  EXPECT_EQ(g[11 * 3], 3.f);  // broadcast over the three lookups
  EXPECT_EQ(g[0], 0.f);

  Tensor dense = randn({4, 2}, 2);  // not marked: no rows recorded
  autograd::set_requires_grad(dense, true);
  autograd::backward(ag::sum(ag::embedding(dense, Tensor::from_ints({1}, {1}))));
  EXPECT_TRUE(autograd::touched_rows(dense).empty());
}

// ---- layer norm ----

struct LnRef {
  std::vector<double> y, mean, rstd, dx, dgamma, dbeta;
};

LnRef layer_norm_ref(const Tensor& x, const Tensor& gamma, const Tensor& beta, const Tensor& dy, double eps) {
  const int64_t c = x.size(-1), rows = x.numel() / c;
  const auto xv = x.to_vector(), g = gamma.to_vector(), b = beta.to_vector(), d = dy.to_vector();
  LnRef r{std::vector<double>(xv.size()), {}, {}, std::vector<double>(xv.size()), std::vector<double>(size_t(c)),
          std::vector<double>(size_t(c))};
  for (int64_t i = 0; i < rows; ++i) {
    const size_t o = size_t(i * c);
    double m = 0, var = 0, sa = 0, sb = 0;
    for (int64_t j = 0; j < c; ++j) m += xv[o + j];
    m /= double(c);
    for (int64_t j = 0; j < c; ++j) var += (xv[o + j] - m) * (xv[o + j] - m);
    const double s = 1 / std::sqrt(var / double(c) + eps);
    r.mean.push_back(m);
    r.rstd.push_back(s);
    for (int64_t j = 0; j < c; ++j) {
      const double h = (xv[o + j] - m) * s;
      r.y[o + j] = h * g[j] + b[j];
      sa += d[o + j] * g[j];
      sb += d[o + j] * g[j] * h;
      r.dgamma[j] += d[o + j] * h;
      r.dbeta[j] += d[o + j];
    }
    for (int64_t j = 0; j < c; ++j) {
      const double h = (xv[o + j] - m) * s;
      r.dx[o + j] = s * (d[o + j] * g[j] - sa / double(c) - h * sb / double(c));
    }
  }
  return r;
}

// Rows of 3 and 2000 (the parallel side: 512 rows a chunk, several chunks of gamma/beta sums);
// non-zero means; every output against a double reference, bitwise equal for 1 and 2 threads.
TEST(LayerNorm, BothSidesOfTheParallelThresholdMatchADoubleReference) {
  const int64_t c = 64;
  for (int64_t rows : {int64_t(3), int64_t(2000)}) {
    SCOPED_TRACE("rows " + std::to_string(rows));
    Tensor x = randn({rows, c}, 1, 2.f, 5.f), gamma = randn({c}, 2, 1.f, 1.f), beta = randn({c}, 3);
    Tensor dy = randn({rows, c}, 4);
    const LnRef ref = layer_norm_ref(x, gamma, beta, dy, 1e-5);
    ops::LayerNormResult one;
    ops::LayerNormGrads g_one;
    for (int t : {1, 2}) {
      Threads th(t);
      auto r = ops::layer_norm(x, gamma, beta, 1e-5f);
      EXPECT_EQ(r.mean.shape(), Shape{rows});
      EXPECT_EQ(r.rstd.dtype(), DType::f32);
      expect_near_all(r.y, ref.y, 1e-5, "y");
      expect_near_all(r.mean, ref.mean, 1e-6, "mean");
      expect_near_all(r.rstd, ref.rstd, 1e-5, "rstd");
      auto g = ops::layer_norm_backward(dy, x, gamma, r);
      expect_near_all(g.dx, ref.dx, 1e-4, "dx");
      expect_near_all(g.dgamma, ref.dgamma, 1e-4 * std::sqrt(double(rows)), "dgamma");
      expect_near_all(g.dbeta, ref.dbeta, 1e-4 * std::sqrt(double(rows)), "dbeta");
      if (t == 1) {
        one = r;
        g_one = g;
        continue;
      }
      expect_bitwise(r.y, one.y, "y across thread counts");
      expect_bitwise(g.dx, g_one.dx, "dx across thread counts");
      expect_bitwise(g.dgamma, g_one.dgamma, "dgamma across thread counts");
      expect_bitwise(g.dbeta, g_one.dbeta, "dbeta across thread counts");
    }
  }
}

// 16-bit inputs compute in f32 and round once: the f32 op on the same values, then one cast.
TEST(LayerNorm, SixteenBitResultIsTheF32ResultRoundedOnce) {
  for (DType dt : {DType::bf16, DType::f16}) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor x = randn({5, 40}, 1, 3.f).to(dt), gamma = randn({40}, 2).to(dt), beta = randn({40}, 3).to(dt);
    Tensor dy = randn({5, 40}, 4).to(dt);
    auto r = ops::layer_norm(x, gamma, beta, 1e-5f);
    auto r32 = ops::layer_norm(x.to(DType::f32), gamma.to(DType::f32), beta.to(DType::f32), 1e-5f);
    expect_bitwise(r.y, ops::cast(r32.y, dt), "y");
    expect_bitwise(r.mean, r32.mean, "mean");
    auto g = ops::layer_norm_backward(dy, x, gamma, r);
    auto g32 = ops::layer_norm_backward(dy.to(DType::f32), x.to(DType::f32), gamma.to(DType::f32), r32);
    expect_bitwise(g.dx, ops::cast(g32.dx, dt), "dx");
    expect_bitwise(g.dgamma, ops::cast(g32.dgamma, dt), "dgamma");
    expect_bitwise(g.dbeta, ops::cast(g32.dbeta, dt), "dbeta");
  }
}

TEST(LayerNorm, BadShapesThrowNamingTheOp) {
  Tensor x = randn({2, 4}, 1), g = randn({4}, 2);
  EXPECT_NE(error_of([&] { ops::layer_norm(x, randn({3}, 2), g, 1e-5f); }).find("[layer_norm] gamma [3]"),
            std::string::npos);
  EXPECT_THROW(ops::layer_norm(x, g, randn({4, 1}, 3), 1e-5f), Error);
  EXPECT_THROW(ops::layer_norm(Tensor::from_ints({1, 2, 3, 4}, {4}), g, g, 1e-5f), Error);
  auto r = ops::layer_norm(x, g, g, 1e-5f);
  EXPECT_NE(error_of([&] {
              ops::layer_norm_backward(randn({4, 2}, 4), x, g, r);
            }).find("[layer_norm_backward] dy"),
            std::string::npos);
  EXPECT_NE(error_of([&] { ops::layer_norm_backward(x.to(DType::bf16), x, g, r); }).find("dtypes differ"),
            std::string::npos);
  ops::LayerNormResult other = ops::layer_norm(randn({3, 4}, 5), g, g, 1e-5f);
  EXPECT_THROW(ops::layer_norm_backward(randn({2, 4}, 4), x, g, other), Error);  // saved for 3 rows, not 2
}

// ---- dropout ----

std::vector<bool> kept(const Tensor& y) {
  const auto v = y.to_vector();
  std::vector<bool> k(v.size());
  for (size_t i = 0; i < v.size(); ++i) k[i] = v[i] != 0.f;
  return k;
}

// Over 2^20 elements (the parallel side) the kept fraction is 1 - p within 10 standard
// deviations, among even and odd indices alike (each hash gives two elements' bits).
TEST(Dropout, KeepsAFractionOneMinusPScaledByItsInverse) {
  const int64_t n = int64_t(1) << 20;
  Tensor ones = Tensor::full({n}, 1.f);
  for (float p : {0.1f, 0.5f, 0.9f}) {
    SCOPED_TRACE("p " + std::to_string(p));
    const auto y = ops::dropout(ones, p, 1234).to_vector();
    int64_t keep[2] = {0, 0};
    for (int64_t i = 0; i < n; ++i) {
      if (y[size_t(i)] == 0.f) continue;
      ASSERT_EQ(y[size_t(i)], 1.f / (1.f - p)) << "element " << i;
      ++keep[i % 2];
    }
    const double sd = std::sqrt(p * (1 - p) / double(n / 2));
    for (int h : {0, 1}) EXPECT_NEAR(double(keep[h]) / double(n / 2), 1.0 - p, 10 * sd) << "parity " << h;
  }
}

// The mask is a function of (seed, index) only: the same for any thread count, tensor size
// (a 7-element tensor, one thread's chunk with an odd tail, is the big one's prefix) and dtype.
TEST(Dropout, MaskDependsOnlyOnSeedAndIndex) {
  const int64_t n = 100003;  // several chunks, odd length
  Tensor x = randn({n}, 1);
  Tensor y1, y2;
  {
    Threads t(1);
    y1 = ops::dropout(x, 0.3f, 99);
  }
  {
    Threads t(2);
    y2 = ops::dropout(x, 0.3f, 99);
  }
  expect_bitwise(y1, y2, "1 vs 2 threads");
  expect_bitwise(ops::dropout(x, 0.3f, 99), y1, "a second call (a recompute)");
  const auto big = kept(y1);
  const auto small = kept(ops::dropout(x.slice(0, 0, 7), 0.3f, 99));
  EXPECT_EQ(small, std::vector<bool>(big.begin(), big.begin() + 7));
  EXPECT_EQ(kept(ops::dropout(Tensor::full({n}, 1.f, DType::bf16), 0.3f, 99)), kept(ops::dropout(x, 0.3f, 99)));
  // Another seed: a different mask, differing in about 2p(1-p) = 42% of places.
  const auto other = kept(ops::dropout(x, 0.3f, 100));
  int64_t diff = 0;
  for (int64_t i = 0; i < n; ++i) diff += other[size_t(i)] != big[size_t(i)];
  EXPECT_NEAR(double(diff) / double(n), 0.42, 0.02);
}

TEST(Dropout, BackwardAppliesTheForwardMask) {
  Tensor x = randn({37, 41}, 1);
  autograd::set_requires_grad(x, true);
  Tensor y = ag::dropout(x, 0.25f, 5);
  Tensor dy = randn({37, 41}, 2);
  autograd::backward(y, dy);
  const auto g = autograd::grad(x).to_vector(), yv = y.to_vector(), xv = x.to_vector(), d = dy.to_vector();
  for (size_t i = 0; i < g.size(); ++i) {
    ASSERT_EQ(g[i] != 0.f, yv[i] != 0.f) << i;
    if (yv[i] != 0.f) {
      EXPECT_EQ(g[i], d[i] * (1.f / 0.75f)) << i;
      EXPECT_EQ(yv[i], xv[i] * (1.f / 0.75f)) << i;
    }
  }
  expect_bitwise(ops::dropout_backward(dy, 0.25f, 5), autograd::grad(x), "dropout_backward");
}

TEST(Dropout, ZeroProbabilityIsTheIdentityAndBadProbabilitiesThrow) {
  Tensor x = randn({3, 5}, 1);
  autograd::set_requires_grad(x, true);
  EXPECT_TRUE(ag::dropout(x, 0.f, 7).same(x));  // no copy, no node
  expect_bitwise(ops::dropout(x, 0.f, 7), x, "ops::dropout with p = 0");
  Tensor h = x.to(DType::f16);
  expect_bitwise(ops::dropout(h, 0.f, 7), h, "f16 with p = 0");
  for (float p : {1.f, -0.1f, 1.5f})
    EXPECT_NE(error_of([&] { ops::dropout(x, p, 1); }).find("[dropout] p must be in [0, 1)"), std::string::npos);
  EXPECT_THROW(ops::dropout_backward(x, 1.f, 1), Error);
}

// ---- select ----

TEST(Select, ReturnsACopyAndScattersTheGradientIntoZeros) {
  Tensor x = randn({2, 3, 4}, 1);
  autograd::set_requires_grad(x, true);
  Tensor y = ag::select(x, 1, 2);
  EXPECT_EQ(y.shape(), (Shape{2, 4}));
  EXPECT_TRUE(y.is_contiguous());
  EXPECT_NE(y.storage(), x.storage());
  autograd::backward(y, Tensor::full({2, 4}, 3.f));
  const auto g = autograd::grad(x).to_vector();
  for (int64_t i = 0; i < 24; ++i) EXPECT_EQ(g[size_t(i)], (i / 4) % 3 == 2 ? 3.f : 0.f) << i;
  EXPECT_NE(error_of([&] { ag::select(x, 1, 3); }).find("[select] index 3"), std::string::npos);
  EXPECT_THROW(ag::select(x, 3, 0), Error);
}

}  // namespace
}  // namespace zt::test
