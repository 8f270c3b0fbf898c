// The fused bias + GELU backward (Note [fused bias-gelu]): dh equals gelu_backward's, db equals the
// row sums, on both sides of the block partition (fewer rows than a block, a remainder block) and of the
// column conversion blocks, independent of the thread count; ag::linear_gelu equals linear then gelu.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "zt/autograd/autograd.h"
#include "zt/autograd/functions.h"
#include "zt/core/parallel.h"
#include "zt/core/random.h"
#include "zt/ops/ops.h"

namespace zt {
namespace {

Tensor randn(const Shape& s, uint64_t seed, DType dt = DType::f32, float scale = 1.f) {
  Generator g(seed);
  std::vector<float> v(static_cast<size_t>(shape_numel(s)));
  for (auto& x : v) x = scale * g.normal(0.f, 1.f);
  return Tensor::from_vector(v, s, dt);
}

// Restores the thread count a test changes.
struct ThreadsGuard {
  int saved = num_threads();
  ~ThreadsGuard() { set_num_threads(saved); }
};

constexpr int64_t kB = ops::kBiasGradBlockRows;

TEST(GeluBias, BlockRowsAreWhatTheShapesBelowAssume) { EXPECT_EQ(kB, 64); }

// dh bitwise equal to gelu_backward; db within one rounding of the exact (double) row sums of the
// f32 dh, for rows below one block, exactly one, a remainder block, and columns past the 512-value
// conversion block that are not a multiple of the 16-lane vectors.
// Both GELU forms (tanh and erf) take the same fused path.
TEST(GeluBias, GradientsEqualGeluBackwardAndItsRowSums) {
  const std::vector<Shape> shapes = {{5, 37}, {kB, 16}, {3 * kB + 7, 37}, {kB + 1, 600}, {2, 3, 48}};
  for (ops::Gelu form : {ops::Gelu::tanh, ops::Gelu::erf}) {
    for (DType dt : {DType::f32, DType::bf16, DType::f16})
      for (const Shape& s : shapes) {
        SCOPED_TRACE(std::string(form == ops::Gelu::erf ? "erf " : "tanh ") + dtype_name(dt) + " " + shape_str(s));
        Tensor h = randn(s, 1, dt, 2.f), dy = randn(s, 2, dt);
        ops::GeluBiasGrads g = ops::gelu_bias_backward(dy, h, form);
        ASSERT_EQ(g.dh.dtype(), dt);
        ASSERT_EQ(g.db.dtype(), dt);
        ASSERT_EQ(g.db.shape(), Shape{s.back()});
        EXPECT_EQ(g.dh.to_vector(), ops::gelu_backward(dy, h, form).to_vector());
        // Reference: the f32 dh of the same values (16-bit: before rounding), summed in double.
        const auto d32 = ops::gelu_backward(ops::cast(dy, DType::f32), ops::cast(h, DType::f32), form).to_vector();
        const int64_t c = s.back(), rows = h.numel() / c;
        const float rtol = dt == DType::bf16 ? 1.f / 256 : dt == DType::f16 ? 1.f / 2048 : 0.f;
        const auto db = g.db.to_vector();
        for (int64_t j = 0; j < c; ++j) {
          double ref = 0, mag = 0;
          for (int64_t r = 0; r < rows; ++r) {
            ref += d32[size_t(r * c + j)];
            mag += std::fabs(d32[size_t(r * c + j)]);
          }
          EXPECT_NEAR(db[size_t(j)], ref, rtol * std::fabs(ref) + 1e-6 * mag + 1e-7) << "column " << j;
        }
      }
  }
}

// The same bits for 1, 2 and 3 threads, with enough blocks and columns that both the row blocks and
// the column-parallel sum of the block partials split across threads.
TEST(GeluBias, ResultsDoNotDependOnTheThreadCount) {
  ThreadsGuard guard;
  for (DType dt : {DType::f32, DType::bf16}) {
    SCOPED_TRACE(dtype_name(dt));
    const Shape s{20 * kB - 30, 3000};
    Tensor h = randn(s, 3, dt, 2.f), dy = randn(s, 4, dt);
    set_num_threads(1);
    ops::GeluBiasGrads one = ops::gelu_bias_backward(dy, h);
    for (int t : {2, 3}) {
      set_num_threads(t);
      ops::GeluBiasGrads many = ops::gelu_bias_backward(dy, h);
      EXPECT_EQ(many.db.to_vector(), one.db.to_vector()) << t << " threads";
      EXPECT_EQ(many.dh.to_vector(), one.dh.to_vector()) << t << " threads";
    }
  }
}

TEST(GeluBias, EmptyRowsGiveAZeroBiasGradient) {
  ops::GeluBiasGrads g = ops::gelu_bias_backward(Tensor::zeros({0, 5}), Tensor::zeros({0, 5}));
  EXPECT_EQ(g.dh.shape(), (Shape{0, 5}));
  EXPECT_EQ(g.db.to_vector(), std::vector<float>(5, 0.f));
}

TEST(GeluBias, ErrorsNameTheOp) {
  auto message = [](auto f) {
    try {
      f();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message([] {
              ops::gelu_bias_backward(Tensor::zeros({2, 3}), Tensor::zeros({2, 4}));
            }).find("[gelu_bias_backward]"),
            std::string::npos);
  EXPECT_NE(message([] {
              ops::gelu_bias_backward(Tensor::zeros({2, 3}), Tensor::zeros({2, 3}, DType::bf16));
            }).find("[gelu_bias_backward] dtypes differ"),
            std::string::npos);
  EXPECT_NE(message([] { ops::gelu_bias_backward(Tensor::zeros({}), Tensor::zeros({})); }).find("0-d"),
            std::string::npos);
}

struct LinearGeluRun {
  Tensor y, dx, dw, db;
};

LinearGeluRun run(bool fused, const Tensor& x0, const Tensor& w0, const Tensor& b0, const Tensor& dy) {
  Tensor x = x0.clone(), w = w0.clone(), b = b0.defined() ? b0.clone() : Tensor();
  for (Tensor* t : {&x, &w, &b})
    if (t->defined()) autograd::set_requires_grad(*t, true);
  const Tensor* pb = b.defined() ? &b : nullptr;
  Tensor y = fused ? ag::linear_gelu(x, w, pb) : ag::gelu(ag::linear(x, w, pb));
  autograd::backward(y, dy);
  return {y, autograd::grad(x), autograd::grad(w), pb ? autograd::grad(b) : Tensor()};
}

// Forward, dx and dw bitwise (the same ops on the same dh); db up to f32 summation order.
TEST(LinearGelu, EqualsLinearThenGelu) {
  for (DType dt : {DType::f32, DType::bf16})
    for (bool bias : {true, false}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + (bias ? " bias" : " no bias"));
      Tensor x = randn({2, kB + 6, 24}, 5, dt), w = randn({40, 24}, 6, dt, 0.3f);
      Tensor b = bias ? randn({40}, 7, dt) : Tensor(), dy = randn({2, kB + 6, 40}, 8, dt);
      LinearGeluRun f = run(true, x, w, b, dy), u = run(false, x, w, b, dy);
      EXPECT_EQ(f.y.to_vector(), u.y.to_vector());
      EXPECT_EQ(f.dx.to_vector(), u.dx.to_vector());
      EXPECT_EQ(f.dw.to_vector(), u.dw.to_vector());
      ASSERT_EQ(f.db.defined(), bias);
      if (!bias) continue;
      const auto fd = f.db.to_vector(), ud = u.db.to_vector();
      const float rtol = dt == DType::bf16 ? 1.f / 64 : 1e-5f;
      for (size_t j = 0; j < fd.size(); ++j) EXPECT_NEAR(fd[j], ud[j], rtol * (1 + std::fabs(ud[j]))) << j;
    }
}

TEST(LinearGelu, ABiasThatNeedsNoGradientGetsNone) {
  Tensor x = randn({3, 4}, 9), w = randn({5, 4}, 10), b = randn({5}, 11);
  autograd::set_requires_grad(w, true);
  autograd::backward(ag::linear_gelu(x, w, &b), randn({3, 5}, 12));
  EXPECT_TRUE(autograd::grad(w).defined());
  EXPECT_FALSE(autograd::grad(b).defined());
  EXPECT_FALSE(autograd::grad(x).defined());
}

}  // namespace
}  // namespace zt
