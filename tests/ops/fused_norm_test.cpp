// Note [fused residual norms] (zt/ops/transformer.h) on every backend: a norm given a residual
// equals ops::add then the norm bit for bit, and a norm's backward into a tensor writes dx there
// or adds it to the values there, rounded once; autograd adds it into the residual's gradient.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "op_table.h"
#include "zt/autograd/autograd.h"
#include "zt/autograd/functions.h"
#include "zt/autograd/layers.h"
#include "zt/core/random.h"
#include "zt/ops/ops.h"
#include "zt/ops/transformer.h"

namespace zt::test {
namespace {

Tensor randn(const Shape& s, uint64_t seed, DType dt = DType::f32) {
  Generator g(seed);
  std::vector<float> v(static_cast<size_t>(shape_numel(s)));
  for (auto& e : v) e = g.normal(0.f, 1.f);
  return Tensor::from_vector(v, s, dt);
}

void expect_bitwise(const Tensor& a_in, const Tensor& b_in, const std::string& what) {
  const Tensor a = a_in.to(Device::cpu()).contiguous(), b = b_in.to(Device::cpu()).contiguous();
  ASSERT_EQ(a.shape(), b.shape()) << what;
  ASSERT_EQ(a.dtype(), b.dtype()) << what;
  EXPECT_EQ(std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()), 0) << what << " differs bitwise";
}

// One norm's forward and backward on a backend, layer norm (with beta) or RMSNorm.
struct Norm {
  bool rms;
  Tensor gamma, beta;
  struct Fwd {
    Tensor y, sum, stat;  // stat: mean (layer norm) or rstd (RMSNorm)
    ops::LayerNormResult ln;
    ops::RmsNormResult rn;
  };
  Fwd forward(const Tensor& x, const Tensor* r) const {
    Fwd f;
    if (rms) {
      f.rn = ops::rms_norm(x, gamma, 1e-5f, r);
      f.y = f.rn.y, f.sum = f.rn.sum, f.stat = f.rn.rstd;
    } else {
      f.ln = ops::layer_norm(x, gamma, beta, 1e-5f, r);
      f.y = f.ln.y, f.sum = f.ln.sum, f.stat = f.ln.mean;
    }
    return f;
  }
  // dx (into `into` where given) and dgamma.
  std::pair<Tensor, Tensor> backward(const Tensor& dy, const Tensor& x, const Fwd& f, Tensor* into, bool acc) const {
    if (rms) {
      auto g = ops::rms_norm_backward(dy, x, gamma, f.rn, into, acc);
      return {g.dx, g.dgamma};
    }
    auto g = ops::layer_norm_backward(dy, x, gamma, f.ln, into, acc);
    return {g.dx, g.dgamma};
  }
};

Norm norm_on(bool rms, int64_t c, DType dt, const std::string& b) {
  return Norm{rms, on_backend(randn({c}, 11, dt), b), on_backend(randn({c}, 12, dt), b)};
}

TEST(FusedNorm, EveryBackendNormalisesTheResidualSumAsAddThenNorm) {
  for (const std::string& b : ops::backends()) {
    if (!backend_present(b)) continue;
    for (DType dt : {DType::f32, DType::bf16, DType::f16})
      for (bool rms : {false, true}) {
        SCOPED_TRACE(b + " " + dtype_name(dt) + (rms ? " rms_norm" : " layer_norm"));
        const Norm n = norm_on(rms, 40, dt, b);
        const Tensor x = on_backend(randn({3, 5, 40}, 1, dt), b), r = on_backend(randn({3, 5, 40}, 2, dt), b);
        const Norm::Fwd fused = n.forward(x, &r);
        const Tensor sum = ops::add(x, r);
        const Norm::Fwd want = n.forward(sum, nullptr);
        expect_bitwise(fused.sum, sum, "sum");
        expect_bitwise(fused.y, want.y, "y");
        expect_bitwise(fused.stat, want.stat, "saved statistics");
        EXPECT_FALSE(want.sum.defined());
      }
  }
}

// Written: dx as the plain backward makes it. Added: the previous values plus the f32 dx, rounded
// once (for f32, the values ops::add makes of the two).
TEST(FusedNorm, EveryBackendBackwardWritesOrAddsDxRoundedOnce) {
  for (const std::string& b : ops::backends()) {
    if (!backend_present(b)) continue;
    for (DType dt : {DType::f32, DType::bf16, DType::f16})
      for (bool rms : {false, true}) {
        SCOPED_TRACE(b + " " + dtype_name(dt) + (rms ? " rms_norm" : " layer_norm"));
        const Norm n = norm_on(rms, 24, dt, b);
        const Tensor x = on_backend(randn({7, 24}, 3, dt), b), dy = on_backend(randn({7, 24}, 4, dt), b);
        const Tensor prev = on_backend(randn({7, 24}, 5, dt), b);
        const Norm::Fwd f = n.forward(x, nullptr);
        const auto [dx, dgamma] = n.backward(dy, x, f, nullptr, false);

        Tensor written = Tensor::full({7, 24}, 9.f, dt, x.device());
        const auto [none, dgamma_w] = n.backward(dy, x, f, &written, false);
        EXPECT_FALSE(none.defined());
        expect_bitwise(written, dx, "dx written into a tensor");
        expect_bitwise(dgamma_w, dgamma, "dgamma");

        const Norm n32{rms, n.gamma.to(DType::f32), n.beta.to(DType::f32)};
        const Tensor x32 = x.to(DType::f32);
        const Tensor dx32 = n32.backward(dy.to(DType::f32), x32, n32.forward(x32, nullptr), nullptr, false).first;
        Tensor added = prev.clone();
        n.backward(dy, x, f, &added, true);
        expect_bitwise(added, ops::cast(ops::add(prev.to(DType::f32), dx32), dt), "dx added to the values there");
      }
  }
}

TEST(FusedNorm, ABadResidualOrDxTensorIsOneErrorNamingTheOp) {
  const Tensor x = randn({2, 4}, 1), g = randn({4}, 2);
  const Tensor r = randn({2, 3}, 3), r16 = randn({2, 4}, 3, DType::bf16);
  EXPECT_THROW(ops::layer_norm(x, g, g, 1e-5f, &r), Error);
  EXPECT_THROW(ops::rms_norm(x, g, 1e-5f, &r16), Error);
  const auto f = ops::layer_norm(x, g, g, 1e-5f);
  const Tensor dy = randn({2, 4}, 5);
  auto error_of = [](auto fn) {
    try {
      fn();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  Tensor strided = randn({4, 2}, 4).transpose(0, 1);  // [2, 4] but not contiguous
  EXPECT_NE(error_of([&] { ops::layer_norm_backward(dy, x, g, f, &strided, true); })
                .find("[layer_norm_backward] dx_into of shape [2, 4] must be contiguous"),
            std::string::npos);
  Tensor into_dy = dy;  // dy's own memory: the kernels read dy after writing dx
  EXPECT_NE(error_of([&] { ops::layer_norm_backward(dy, x, g, f, &into_dy, false); }).find("dx_into shares memory with dy"),
            std::string::npos);
  const auto fr = ops::rms_norm(x, g, 1e-5f);
  EXPECT_NE(error_of([&] { ops::rms_norm_backward(dy, x, g, fr, nullptr, true); }).find("accumulate needs dx_into"),
            std::string::npos);
  EXPECT_NE(error_of([&] { ops::rms_norm(x, g, 1e-5f, &r16); }).find("the residual's dtype bf16 differs from x's f32"),
            std::string::npos);
}

// Through autograd: out = sum + norm(sum), sum = x + r (a pre-norm block's two uses of the
// residual). The norm's dx lands in the slot holding the add's gradient: the leaves get
// up + dx, bit for bit the unfused sum of the two gradients.
TEST(FusedNorm, AutogradAddsTheNormGradientToTheResidualGradient) {
  for (bool rms : {false, true}) {
    SCOPED_TRACE(rms ? "rms_norm" : "layer_norm");
    Tensor x = randn({4, 16}, 1), r = randn({4, 16}, 2), gamma = randn({16}, 3), beta = randn({16}, 4);
    for (Tensor* t : {&x, &r, &gamma, &beta}) autograd::set_requires_grad(*t, true);
    const ag::AddNorm a = rms ? ag::add_rms_norm(x, r, gamma, 1e-5f) : ag::add_layer_norm(x, r, gamma, beta, 1e-5f);
    const Tensor up = randn({4, 16}, 5);
    autograd::backward(ag::add(a.sum, a.y), up);

    const Norm n{rms, autograd::detached(gamma), autograd::detached(beta)};
    const Tensor sum = ops::add(x, r);
    const auto [dx, dgamma] = n.backward(up, sum, n.forward(sum, nullptr), nullptr, false);
    const Tensor want = ops::add(up, dx);
    expect_bitwise(autograd::grad(x), want, "x's gradient");
    expect_bitwise(autograd::grad(r), want, "r's gradient");
    expect_bitwise(autograd::grad(gamma), dgamma, "gamma's gradient");
  }
}

// An activation checkpoint's block input is a leaf: the norm adds dx into its .grad the same way,
// so 16-bit gradients are the same bits with and without checkpointing (rounded once either way).
TEST(FusedNorm, ALeafTakesTheNormGradientAsANonLeafDoes) {
  for (bool rms : {false, true}) {
    SCOPED_TRACE(rms ? "rms_norm" : "layer_norm");
    const Tensor gamma = randn({32}, 3, DType::bf16), beta = randn({32}, 4, DType::bf16), up = randn({6, 32}, 5, DType::bf16);
    auto grad_of = [&](bool leaf) {
      Tensor x = randn({6, 32}, 1, DType::bf16);
      autograd::set_requires_grad(x, true);
      const Tensor in = leaf ? x : ag::mul(x, Tensor::full({6, 32}, 1.f, DType::bf16));  // times 1: exact
      const Tensor y = rms ? ag::rms_norm(in, gamma, 1e-5f) : ag::layer_norm(in, gamma, beta, 1e-5f);
      autograd::backward(ag::add(in, y), up);
      return autograd::grad(x);
    };
    expect_bitwise(grad_of(true), grad_of(false), "the leaf's gradient");
  }
}

}  // namespace
}  // namespace zt::test
