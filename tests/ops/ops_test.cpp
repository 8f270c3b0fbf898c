// Op behaviour the fixtures do not reach: errors, both sides of size-dependent branches
// (parallel grains, plain vs copied matmul layouts, empty dims), caching, autograd plumbing.
#include <gtest/gtest.h>

#include <cmath>

#include "zt/autograd/autograd.h"
#include "zt/autograd/functions.h"
#include "zt/autograd/layers.h"
#include "zt/core/random.h"
#include "zt/ops/ops.h"

namespace zt {
namespace {

Tensor randn(const Shape& s, uint64_t seed, DType dt = DType::f32) {
  Generator g(seed);
  std::vector<float> v(static_cast<size_t>(shape_numel(s)));
  for (auto& x : v) x = g.normal(0.f, 1.f);
  return Tensor::from_vector(v, s, dt);
}

void expect_all_near(const Tensor& a, const Tensor& b, float tol) {
  ASSERT_EQ(a.shape(), b.shape());
  auto va = a.to_vector(), vb = b.to_vector();
  for (size_t i = 0; i < va.size(); ++i) ASSERT_NEAR(va[i], vb[i], tol * (1 + std::fabs(vb[i]))) << "at " << i;
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

// Naive reference product for layout tests.
Tensor ref_mm(const Tensor& a, const Tensor& b) {
  auto va = a.to_vector(), vb = b.to_vector();
  int64_t m = a.size(0), k = a.size(1), n = b.size(1);
  std::vector<float> c(size_t(m * n), 0.f);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t l = 0; l < k; ++l) s += double(va[size_t(i * k + l)]) * vb[size_t(l * n + j)];
      c[size_t(i * n + j)] = float(s);
    }
  return Tensor::from_vector(c, {m, n});
}

TEST(Ops, ErrorsNameTheOp) {
  expect_error([] { ops::matmul(Tensor::zeros({2, 3}), Tensor::zeros({4, 2})); }, "[matmul] inner dimensions 3 and 4");
  expect_error([] { ops::add(Tensor::zeros({2, 3}), Tensor::zeros({4})); }, "[broadcast]");
  expect_error([] { ops::add(Tensor::zeros({2}), Tensor::zeros({2}, DType::bf16)); }, "[add] dtypes differ");
  expect_error([] { ops::relu(Tensor::from_ints({1}, {1})); }, "allowed: f32, bf16, f16");
  expect_error([] { ops::linear(Tensor::zeros({2, 3}), Tensor::zeros({4, 5}), nullptr); }, "[linear]");
  expect_error(
      [] {
        ops::cross_entropy(Tensor::zeros({2, 3}), Tensor::from_ints({0, 3}, {2}));
      },
      "target 3 at row 1 is outside [0, 3)");
  expect_error([] { ops::sum(Tensor::zeros({2, 3}), 2, false); }, "[sum] dimension 2 out of range");
  expect_error([] { ops::sum_to(Tensor::zeros({2, 3}), {4}); }, "[sum_to]");
}

TEST(Ops, MatmulPrimitivesAreCached) {
  Tensor a = randn({5, 7}, 1), b = randn({7, 3}, 2);
  ops::matmul(a, b);
  const size_t n = ops::matmul_cache_size();
  for (int i = 0; i < 3; ++i) ops::matmul(randn({5, 7}, 3), randn({7, 3}, 4));
  EXPECT_EQ(ops::matmul_cache_size(), n);
  ops::matmul(a, randn({7, 4}, 5));
  EXPECT_EQ(ops::matmul_cache_size(), n + 1);
}

TEST(Ops, MatmulStridedLayouts) {
  Tensor base = randn({4, 5, 3}, 7);
  Tensor plain_t = randn({6, 4}, 8).transpose(0, 1);  // unit stride in rows: used in place
  Tensor no_unit = base.select(2, 1);                 // strides {15, 3}: copied first
  ASSERT_FALSE(no_unit.is_contiguous());
  Tensor b = randn({5, 6}, 9);
  expect_all_near(ops::matmul(no_unit, b), ref_mm(no_unit.contiguous(), b), 1e-5f);
  expect_all_near(ops::matmul(plain_t, randn({6, 2}, 10)), ref_mm(plain_t.contiguous(), randn({6, 2}, 10)), 1e-5f);
  // Batched with a transposed batch dimension (batch stride smaller than a matrix).
  Tensor bt = base.transpose(0, 1);  // [5, 4, 3]
  Tensor w = randn({5, 3, 2}, 11);
  Tensor out = ops::matmul(bt, w);
  for (int64_t i = 0; i < 5; ++i)
    expect_all_near(out.select(0, i).contiguous(), ref_mm(bt.select(0, i).contiguous(), w.select(0, i).contiguous()),
                    1e-5f);
}

TEST(Ops, MatmulEmptyInnerDimension) {
  Tensor out = ops::matmul(Tensor::zeros({2, 0}), Tensor::zeros({0, 3}));
  EXPECT_EQ(out.shape(), (Shape{2, 3}));
  for (float v : out.to_vector()) EXPECT_EQ(v, 0.f);
  Tensor bias = Tensor::from_vector({1, 2, 3}, {3});
  EXPECT_EQ(ops::linear(Tensor::zeros({2, 0}), Tensor::zeros({3, 0}), &bias).to_vector(),
            (std::vector<float>{1, 2, 3, 1, 2, 3}));
  EXPECT_EQ(ops::matmul(Tensor::zeros({0, 4}), Tensor::zeros({4, 3})).shape(), (Shape{0, 3}));
}

// Both sides of Note [low-precision fallback]: oneDNN's 16-bit kernel where the CPU has one,
// and the forced f32 fallback, which must equal the f32 product of the same values rounded once.
TEST(Ops, LowPrecisionMatmulOnBothSidesOfTheFallback) {
  for (DType dt : {DType::bf16, DType::f16}) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor a = randn({64, 96}, 12, dt), b = randn({32, 96}, 13, dt), bias = randn({32}, 14, dt);
    Tensor a3 = randn({2, 5, 7}, 15, dt), b3 = randn({2, 7, 3}, 16, dt);
    auto run_all = [&] {
      return std::vector<Tensor>{ops::matmul(a, b, false, true), ops::linear(a, b, &bias), ops::matmul(a3, b3),
                                 ops::matmul(b, a.transpose(0, 1))};
    };
    auto reference = [&] {
      Tensor a32 = ops::cast(a, DType::f32), b32 = ops::cast(b, DType::f32), bias32 = ops::cast(bias, DType::f32);
      return std::vector<Tensor>{ops::cast(ops::matmul(a32, b32, false, true), dt),
                                 ops::cast(ops::linear(a32, b32, &bias32), dt),
                                 ops::cast(ops::matmul(ops::cast(a3, DType::f32), ops::cast(b3, DType::f32)), dt),
                                 ops::cast(ops::matmul(b32, a32.transpose(0, 1)), dt)};
    };
    const std::vector<Tensor> want = reference();

    const int64_t before = ops::matmul_fallback_count();
    const std::vector<Tensor> native = run_all();
    EXPECT_EQ(ops::matmul_fallback_count() - before, ops::matmul_native(dt) ? 0 : 4);
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ(native[i].dtype(), dt);
      expect_all_near(native[i], want[i], dt == DType::bf16 ? 8e-3f : 1e-3f);  // summation order differs
    }

    ops::set_matmul_lowp_fallback_for_testing(true);
    const int64_t forced_before = ops::matmul_fallback_count();
    const std::vector<Tensor> forced = run_all();
    ops::set_matmul_lowp_fallback_for_testing(false);
    EXPECT_EQ(ops::matmul_fallback_count() - forced_before, 4);
    for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(forced[i].to_vector(), want[i].to_vector()) << "product " << i;
  }
  EXPECT_TRUE(ops::matmul_native(DType::f32));
}

TEST(Ops, LinearOneDimensionalInput) {
  Tensor x = randn({5}, 14), w = randn({3, 5}, 15);
  Tensor y = ops::linear(x, w, nullptr);
  EXPECT_EQ(y.shape(), (Shape{3}));
  expect_all_near(y, ref_mm(x.reshape({1, 5}), w.transpose(0, 1).contiguous()).reshape({3}), 1e-5f);
}

// Note [weight gradients in row blocks], both sides: a weight of kGradRowBlock rows takes one
// product, one row more takes blocks; either adds dy^T x into the slot, in its dtype or f32.
TEST(Ops, WeightGradientsInRowBlocksEqualTheWholeProduct) {
  EXPECT_EQ(ops::weight_grad_block_rows(ops::kGradRowBlock), ops::kGradRowBlock);
  EXPECT_EQ(ops::weight_grad_block_rows(ops::kGradRowBlock + 1), ops::kGradRowBlock / 2 + 64);
  EXPECT_EQ(ops::weight_grad_block_rows(50257), 3904);  // GPT-2's head: 13 blocks, the last of 3409 rows
  for (int64_t rows : {ops::kGradRowBlock, ops::kGradRowBlock + 905}) {
    for (DType dt : {DType::f32, DType::bf16}) {
      for (DType slot_dt : {dt, DType::f32}) {
        SCOPED_TRACE(std::to_string(rows) + " " + dtype_name(dt) + " into " + dtype_name(slot_dt));
        Tensor dy = randn({2, 3, rows}, 30, dt), x = randn({2, 3, 24}, 31, dt), start = randn({rows, 24}, 32, slot_dt);
        Tensor slot = start.clone();
        ops::add_linear_weight_grad(slot, dy, x);
        Tensor whole = ops::matmul(dy.reshape({6, rows}), x.reshape({6, 24}), true, false);
        Tensor want = ops::add(ops::cast(start, DType::f32), ops::cast(whole, DType::f32));
        expect_all_near(ops::cast(slot, DType::f32), want, dt == DType::f32 ? 1e-5f : 1e-2f);
      }
    }
  }
  Tensor slot = Tensor::zeros({ops::kGradRowBlock + 1, 4});
  const Tensor dy = randn({3, 5}, 33), x = randn({3, 4}, 34);  // dy^T x is [5, 4], not the slot's shape
  expect_error([&] { ops::add_linear_weight_grad(slot, dy, x); }, "add_linear_weight_grad");
}

// Backward of a linear whose weight is blocked never holds its whole [out, in] gradient.
TEST(Autograd, ALargeWeightsGradientIsAddedABlockAtATime) {
  const int64_t rows = 5 * ops::kGradRowBlock, in = 64;
  Tensor x = randn({8, in}, 35), w = randn({rows, in}, 36);
  autograd::set_requires_grad(w, true);
  autograd::set_requires_grad(x, true);
  Tensor loss = ag::sum(ag::linear(x, w, nullptr));
  Allocator::global().reset_peaks();
  const size_t before = Allocator::global().stats().current[size_t(MemTag::activation)];
  autograd::backward(loss);
  const size_t whole = size_t(rows * in) * sizeof(float);
  EXPECT_LT(Allocator::global().stats().peak_of(MemTag::activation) - before, whole / 2);
  ops::LinearGrads want = ops::linear_backward(Tensor::full({8, rows}, 1.f), x, w, true, false);
  expect_all_near(autograd::grad(w), want.dw, 1e-5f);
  expect_all_near(autograd::grad(x), want.dx, 1e-5f);
}

// Note [gradients written in place], both sides: into a zeroed slot of its dtype, 16-byte aligned,
// the product is written with no temporary, bit for bit what adding it into zeros gives; a slot
// of another dtype or off alignment goes through the temporary.
TEST(Ops, AWeightGradientIsWrittenIntoAZeroedSlot) {
  for (int64_t rows : {ops::kGradRowBlock, ops::kGradRowBlock + 905}) {
    for (DType dt : {DType::f32, DType::bf16}) {
      SCOPED_TRACE(std::to_string(rows) + " " + dtype_name(dt));
      const Tensor dy = randn({6, rows}, 37, dt), x = randn({6, 24}, 38, dt);
      Tensor added = Tensor::zeros({rows, 24}, dt);
      ops::add_linear_weight_grad(added, dy, x);
      Tensor written = Tensor::zeros({rows, 24}, dt);
      Allocator::global().reset_peaks();
      const size_t before = Allocator::global().stats().total_current;
      ops::add_linear_weight_grad(written, dy, x, /*zeroed=*/true);
      if (ops::matmul_native(dt)) {  // the fallback widens its operands (Note [low-precision fallback])
        EXPECT_LT(Allocator::global().stats().total_peak - before, size_t(24 * 64) * dtype_size(dt)) << "a temporary";
      }
      EXPECT_EQ(written.to_vector(), added.to_vector());
      // Off alignment (one element into a flat buffer) and in f32 for a bf16 product: the temporary.
      Tensor flat = Tensor::zeros({rows * 24 + 1}, dt), f32 = Tensor::zeros({rows, 24});
      Tensor shifted = flat.slice(0, 1, rows * 24 + 1).view({rows, 24});
      ops::add_linear_weight_grad(shifted, dy, x, true);
      ops::add_linear_weight_grad(f32, dy, x, true);
      EXPECT_EQ(shifted.to_vector(), added.to_vector());
      expect_all_near(f32, ops::cast(added, DType::f32), dt == DType::f32 ? 0.f : 1e-2f);
    }
  }
}

// Note [gradient blocks]: a row gradient makes any range of its rows alone (a linear's weight
// from the rows of dy, an embedding's from the positions whose ids fall there), bit for bit the
// rows the whole gradient holds; a dense gradient is copied; a range past the rows is an error.
TEST(Autograd, ARowGradientWritesAnyRangeOfItsRows) {
  for (DType dt : {DType::f32, DType::bf16}) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor x = randn({12, 24}, 42, dt), w = randn({50, 24}, 43, dt), b = randn({50}, 44, dt),
           e = randn({40, 24}, 45, dt);
    const Tensor ids = Tensor::from_ints({3, 7, 3, 39, 0, 7, 7, 21, 3, 38, 12, 5}, {2, 6});
    auto loss_of = [&] {
      Tensor h = ag::add(ag::linear(x, w, &b), ag::linear(ag::reshape(ag::embedding(e, ids), {12, 24}), w, nullptr));
      return ag::sum(ag::mul(h, h));
    };
    for (const Tensor& p : {w, b, e}) autograd::set_requires_grad(p, true);
    autograd::backward(loss_of());  // the whole gradients, into .grad
    const Tensor whole[3] = {autograd::grad(w), autograd::grad(b), autograd::grad(e)};
    std::vector<Tensor> uses[3];
    const Tensor params[3] = {w, b, e};
    for (int i = 0; i < 3; ++i)
      autograd::set_grad_sink(params[i], [&uses, i](const Tensor&, const Tensor& g) { uses[i].push_back(g); });
    autograd::backward(loss_of());
    for (const Tensor& p : params) autograd::set_grad_sink(p, nullptr);
    ASSERT_EQ(uses[0].size(), 2u);  // w's two uses, each its own gradient
    ASSERT_EQ(uses[1].size(), 1u);
    ASSERT_EQ(uses[2].size(), 1u);
    for (int i = 0; i < 3; ++i) {
      const Tensor& want = whole[i];
      const int64_t rows = want.size(0), c = want.numel() / rows;
      for (auto [r0, r1] : {std::pair<int64_t, int64_t>{0, rows}, {1, 2}, {3, 22}, {rows - 5, rows}}) {
        if (r1 > rows) continue;
        Tensor sum = Tensor::zeros({r1 - r0, c});
        for (const Tensor& g : uses[i]) {
          Tensor part = Tensor::empty({r1 - r0, c}, dt);
          autograd::write_grad_rows(g, part, r0);
          sum = ops::add(sum, ops::cast(part, DType::f32));
        }
        Tensor expect = ops::cast(want.contiguous().view({rows, c}).slice(0, r0, r1).contiguous(), DType::f32);
        if (uses[i].size() == 1) {
          EXPECT_EQ(sum.to_vector(), expect.to_vector()) << "parameter " << i << " rows " << r0 << ".." << r1;
        } else {
          expect_all_near(sum, expect, dt == DType::f32 ? 1e-5f : 1e-2f);  // two uses: two roundings
        }
      }
    }
    Tensor past = Tensor::empty({3, 24}, dt);
    expect_error([&] { autograd::write_grad_rows(uses[0][0], past, 48); }, "rows 48..51");
  }
}

// A slot marked zeroed takes the first gradient written; the next use (a tied weight) and the
// next pass (accumulation) add, until the engine zeroes the slot again and says so.
TEST(Autograd, OnlyTheFirstGradientIntoAZeroedSlotIsWritten) {
  Tensor x1 = randn({5, 8}, 39), x2 = randn({5, 8}, 40), w = randn({3, 8}, 41);
  autograd::set_requires_grad(w, true);
  auto pass = [&] {
    autograd::backward(ag::add(ag::sum(ag::linear(x1, w, nullptr)), ag::sum(ag::linear(x2, w, nullptr))));
  };
  const Tensor ones = Tensor::full({5, 3}, 1.f);
  const Tensor once =
      ops::add(ops::linear_backward(ones, x1, w, false, false).dw, ops::linear_backward(ones, x2, w, false, false).dw);
  Tensor slot = Tensor::zeros({3, 8});
  autograd::set_grad(w, slot, /*zeroed=*/true);
  pass();
  expect_all_near(slot, once, 1e-5f);
  pass();  // accumulates: nothing said the slot was zeroed
  expect_all_near(slot, ops::add(once, once), 1e-5f);
  slot.zero_();
  autograd::mark_grad_zeroed(w);
  pass();
  expect_all_near(slot, once, 1e-5f);
}

// Sizes above and below the parallel grain give the same values as a scalar reference.
TEST(Ops, LargeAndSmallSizesAgree) {
  for (int64_t rows : {3, 3000}) {
    Tensor a = randn({rows, 70}, 16), b = randn({70}, 17);
    Tensor s = ops::add(a, b);
    auto va = a.to_vector(), vb = b.to_vector(), vs = s.to_vector();
    for (int64_t i = 0; i < rows * 70; ++i) ASSERT_FLOAT_EQ(vs[size_t(i)], va[size_t(i)] + vb[size_t(i % 70)]);
    double total = 0;
    for (float v : va) total += v;
    EXPECT_NEAR(ops::sum(a).item(), total, 1e-4 * std::sqrt(double(va.size())));
    Tensor cols = ops::sum(a, 0, false);    // inner > 1 path
    Tensor rowsum = ops::sum(a, 1, false);  // innermost path
    Tensor back = ops::sum_to(ops::add(a, b), {70});
    auto vc = cols.to_vector(), vr = rowsum.to_vector(), vback = back.to_vector();
    for (int64_t j = 0; j < 70; ++j) {
      double c = 0;
      for (int64_t i = 0; i < rows; ++i) c += va[size_t(i * 70 + j)];
      EXPECT_NEAR(vc[size_t(j)], c, 1e-3);
      EXPECT_NEAR(vback[size_t(j)], c + rows * double(vb[size_t(j)]), 2e-3 * rows / 100 + 1e-3);
    }
    double r0 = 0;
    for (int64_t j = 0; j < 70; ++j) r0 += va[size_t(j)];
    EXPECT_NEAR(vr[0], r0, 1e-4);
    Tensor sm = ops::softmax(a);
    double p = 0;
    for (float v : ops::sum(sm, 1, false).to_vector()) p += v;
    EXPECT_NEAR(p, double(rows), 1e-3 * rows);
  }
  // Inner dimension wider than one accumulation chunk.
  Tensor wide = randn({2, 3, 2500}, 18);
  Tensor ws = ops::sum(wide, 1, true);
  auto vw = wide.to_vector(), vs = ws.to_vector();
  for (int64_t o = 0; o < 2; ++o)
    for (int64_t i = 0; i < 2500; i += 499)
      EXPECT_NEAR(vs[size_t(o * 2500 + i)],
                  vw[size_t(o * 7500 + i)] + vw[size_t(o * 7500 + 2500 + i)] + vw[size_t(o * 7500 + 5000 + i)], 1e-5);
}

// The 16-bit contract: an op on bf16/f16 values equals the f32 op on the same values, rounded
// once; on both sides of the parallel grain and through the block conversions' tails.
TEST(Ops, SixteenBitOpsEqualTheF32OpRoundedOnce) {
  for (DType dt : {DType::bf16, DType::f16})
    for (int64_t rows : {3, 3000}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " rows=" + std::to_string(rows));
      Tensor a = randn({rows, 70}, 30, dt), b = randn({70}, 31, dt), dy = randn({rows, 70}, 32, dt);
      Tensor a32 = ops::cast(a, DType::f32), b32 = ops::cast(b, DType::f32), dy32 = ops::cast(dy, DType::f32);
      auto same = [&](const Tensor& got, const Tensor& f32_result, const char* what) {
        EXPECT_EQ(got.dtype(), dt) << what;
        EXPECT_EQ(got.to_vector(), ops::cast(f32_result, dt).to_vector()) << what;
      };
      same(ops::add(a, b), ops::add(a32, b32), "add");
      same(ops::mul(a, a), ops::mul(a32, a32), "mul");
      same(ops::scale(a, 0.37f), ops::scale(a32, 0.37f), "scale");
      same(ops::gelu(a), ops::gelu(a32), "gelu");
      same(ops::gelu_backward(dy, a), ops::gelu_backward(dy32, a32), "gelu_backward");
      same(ops::relu_backward(dy, a), ops::relu_backward(dy32, a32), "relu_backward");
      same(ops::softmax(a), ops::softmax(a32), "softmax");
      same(ops::log_softmax_backward(dy, a), ops::log_softmax_backward(dy32, a32), "log_softmax_backward");
      same(ops::sum(a, 0, false), ops::sum(a32, 0, false), "sum over rows");
      same(ops::sum_to(a, {70}), ops::sum_to(a32, {70}), "sum_to");
      auto ce = ops::cross_entropy(a, Tensor::from_ints(std::vector<int32_t>(size_t(rows), 5), {rows}));
      auto ce32 = ops::cross_entropy(a32, Tensor::from_ints(std::vector<int32_t>(size_t(rows), 5), {rows}));
      EXPECT_EQ(ce.loss.dtype(), DType::f32);
      EXPECT_EQ(ce.loss.item(), ce32.loss.item()) << "cross_entropy computes in f32";
    }
}

TEST(Ops, InPlaceAccumulation) {
  Tensor d = Tensor::from_vector({1, 2, 3}, {3});
  ops::add_(d, Tensor::from_vector({1, 1, 1}, {3}));
  ops::axpy_(d, 0.5f, Tensor::from_vector({2, 4, 6}, {3}));
  EXPECT_EQ(d.to_vector(), (std::vector<float>{3, 5, 7}));
  Tensor strided = Tensor::from_vector({1, 2, 3, 4}, {2, 2}).transpose(0, 1);
  Tensor acc = Tensor::zeros({2, 2});
  ops::add_(acc, strided);
  EXPECT_EQ(acc.to_vector(), (std::vector<float>{1, 3, 2, 4}));
  EXPECT_EQ(ops::add_scalar(acc, 1.f).to_vector(), (std::vector<float>{2, 4, 3, 5}));
}

TEST(Ops, ExpandReduced) {
  Tensor dy = Tensor::from_vector({1, 2}, {2});
  EXPECT_EQ(ops::expand_reduced(dy, {2, 3}, 1, false, 0.5f).to_vector(),
            (std::vector<float>{0.5f, 0.5f, 0.5f, 1, 1, 1}));
  Tensor dy3 = Tensor::from_vector({1, 2, 3}, {1, 3});
  EXPECT_EQ(ops::expand_reduced(dy3, {2, 3}, 0, true, 1.f).to_vector(), (std::vector<float>{1, 2, 3, 1, 2, 3}));
  EXPECT_EQ(ops::expand_reduced(dy.reshape({2, 1}), {2, 3}, -1, true, 2.f).to_vector(),
            (std::vector<float>{2, 2, 2, 4, 4, 4}));
}

// A vocabulary of several conversion blocks (1,300 = 512 + 512 + 276): each target's -1 lands in
// its own block; 16-bit logits give the f32 result rounded once; f32 matches softmax - onehot.
TEST(Ops, CrossEntropyBackwardOverSeveralBlocks) {
  const int64_t c = 1300;
  const std::vector<int32_t> t = {0, 511, 512, 1100, 1299, -100};
  const int64_t rows = int64_t(t.size());
  Tensor x32 = randn({rows, c}, 41);
  Tensor targets = Tensor::from_ints(t, {rows});
  const auto ce32 = ops::cross_entropy(x32, targets);
  const auto g32 = ops::cross_entropy_backward(2.f, ce32, targets, -100).to_vector();
  const auto x = x32.to_vector();
  for (int64_t r = 0; r < rows; ++r) {
    SCOPED_TRACE("row " + std::to_string(r));
    double sum = 0;
    for (int64_t j = 0; j < c; ++j) sum += std::exp(double(x[size_t(r * c + j)]));
    for (int64_t j = 0; j < c; ++j) {
      const double want = t[size_t(r)] < 0 ? 0.0
                                           : 2.0 / double(ce32.count) *
                                                 (std::exp(double(x[size_t(r * c + j)])) / sum - (j == t[size_t(r)]));
      ASSERT_NEAR(g32[size_t(r * c + j)], want, 1e-6) << "column " << j;
    }
  }
  for (DType dt : {DType::bf16, DType::f16}) {
    Tensor x16 = ops::cast(x32, dt), x16_32 = ops::cast(x16, DType::f32);
    const auto got = ops::cross_entropy_backward(2.f, ops::cross_entropy(x16, targets), targets, -100);
    const auto want = ops::cross_entropy_backward(2.f, ops::cross_entropy(x16_32, targets), targets, -100);
    EXPECT_EQ(got.to_vector(), ops::cast(want, dt).to_vector()) << dtype_name(dt);
  }
}

// Note [one-pass classifier]: the forward's gradient is the two-pass backward's at dloss = 1, bit
// for bit, over several blocks and an ignored row, in every float dtype; the saved logits go.
TEST(Ops, CrossEntropyOnePassWritesTheTwoPassGradient) {
  const int64_t c = 1300;
  Tensor targets = Tensor::from_ints({0, 511, 512, 1100, 1299, -100}, {6});
  for (DType dt : {DType::f32, DType::bf16, DType::f16}) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor x = ops::cast(randn({6, c}, 43), dt);
    const auto two = ops::cross_entropy(x, targets);
    const auto one = ops::cross_entropy(x, targets, -100, true);
    EXPECT_FALSE(one.logits.defined());
    EXPECT_EQ(one.grad.dtype(), dt);
    EXPECT_EQ(one.loss.item(), two.loss.item());
    EXPECT_EQ(one.lse.to_vector(), two.lse.to_vector());
    EXPECT_EQ(one.grad.to_vector(), ops::cross_entropy_backward(1.f, two, targets, -100).to_vector());
    EXPECT_EQ(ops::cross_entropy_backward(4.f, one, targets, -100).to_vector(),
              ops::scale(one.grad, 4.f).to_vector());
  }
}

TEST(Ops, CrossEntropyAllIgnoredIsZero) {
  Tensor logits = randn({3, 4}, 19);
  autograd::set_requires_grad(logits, true);
  Tensor loss = ag::cross_entropy(logits, Tensor::from_ints({-100, -100, -100}, {3}));
  EXPECT_EQ(loss.item(), 0.f);
  autograd::backward(loss);
  for (float v : autograd::grad(logits).to_vector()) EXPECT_EQ(v, 0.f);
}

TEST(Ops, SoftmaxLargeLogitsStayFinite) {
  Tensor x = Tensor::from_vector({1000.f, 999.f, -1000.f, 0.f}, {1, 4});
  auto p = ops::softmax(x).to_vector();
  EXPECT_NEAR(p[0], 1.f / (1.f + std::exp(-1.f)), 1e-6);
  EXPECT_EQ(p[2], 0.f);
  auto lp = ops::log_softmax(x).to_vector();
  EXPECT_NEAR(lp[2], -2000.f - std::log1p(std::exp(-1.f)), 1e-2);
}

TEST(Autograd, OnlyRequestedGradsAndGraphIsFreed) {
  Tensor a = randn({3, 4}, 20), b = randn({4, 2}, 21);
  autograd::set_requires_grad(a, true);
  std::weak_ptr<TensorImpl> weak_out;
  {
    Tensor y = ag::softmax(ag::matmul(a, b));
    weak_out = y.impl_ptr();
    autograd::backward(ag::sum(y));
  }
  EXPECT_TRUE(autograd::grad(a).defined());
  EXPECT_FALSE(autograd::grad(b).defined());
  EXPECT_TRUE(weak_out.expired());  // saved outputs do not keep themselves alive
  {
    Tensor y = ag::log_softmax(a);  // never backpropagated: must still be freed
    weak_out = y.impl_ptr();
  }
  EXPECT_TRUE(weak_out.expired());
}

// Note [first gradient taken]: a gradient the consumer made and let go of becomes the producer's
// gradient as it is; one the consumer also keeps, or hands to two inputs, is copied first.
TEST(Autograd, AnActivationsFirstGradientIsTakenOnlyWhenNothingElseHoldsIt) {
  Tensor x = randn({4, 4}, 23);
  autograd::set_requires_grad(x, true);
  std::vector<const void*> received(3, nullptr);
  auto producer = [&](int k) {  // an activation that records the memory of the gradient it gets
    return autograd::record(ops::scale(x, 1.f), {x}, "producer", [&received, k](const Tensor& g) {
      received[size_t(k)] = g.raw_data();
      return std::vector<Tensor>{ops::scale(g, 1.f)};
    });
  };
  Tensor kept;
  const void* made = nullptr;
  Tensor a = producer(0), b = producer(1), c = producer(2);
  // Consumer of a: makes a fresh gradient and lets it go. Of b and c: one tensor for both,
  // which the consumer also keeps.
  Tensor ya = autograd::record(ops::scale(a, 1.f), {a}, "fresh", [&made](const Tensor& g) {
    Tensor out = ops::scale(g, 2.f);
    made = out.raw_data();
    return std::vector<Tensor>{out};
  });
  Tensor ybc = autograd::record(ops::add(b, c), {b, c}, "shared", [&kept](const Tensor& g) {
    kept = ops::scale(g, 3.f);
    return std::vector<Tensor>{kept, kept};
  });
  autograd::backward(ag::add(ag::sum(ya), ag::sum(ybc)));
  EXPECT_EQ(received[0], made) << "a fresh gradient nothing else holds is taken";
  EXPECT_NE(received[1], kept.raw_data());
  EXPECT_NE(received[2], kept.raw_data());
  EXPECT_NE(received[1], received[2]) << "one tensor handed to two inputs is copied";
  for (float v : autograd::grad(x).to_vector()) EXPECT_EQ(v, 2.f + 3.f + 3.f);
}

TEST(Autograd, BackwardTensorsUseCurrentTag) {
  Tensor a = randn({8, 8}, 22);
  autograd::set_requires_grad(a, true);
  Tensor y = ag::sum(ag::gelu(a));
  TagScope scope(MemTag::workspace);
  const size_t before = Allocator::global().stats().peak_of(MemTag::workspace);
  Allocator::global().reset_peaks();
  autograd::backward(y);
  EXPECT_GT(Allocator::global().stats().peak_of(MemTag::workspace), 0u);
  (void)before;
}

}  // namespace
}  // namespace zt
