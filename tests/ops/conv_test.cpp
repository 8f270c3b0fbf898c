// conv2d and max_pool2d: PyTorch goldens (tests/golden/gen_golden_conv.py) forward and backward in
// f32, bf16 (oneDNN's kernel and the forced fallback) and f16, finite-difference gradients, the
// argument errors, and the primitive cache (steady state creates none).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <numeric>
#include <set>

#include "../common/source_dir.h"
#include "common/error_of.h"
#include "op_table.h"
#include "zt/autograd/autograd.h"
#include "zt/autograd/functions.h"
#include "zt/autograd/layers.h"
#include "zt/core/random.h"
#include "zt/ops/conv.h"
#include "zt/ops/ops.h"

namespace zt::test {
namespace {

using ::testing::HasSubstr;
using testing_util::error_of;

json load_fixture() {
  std::ifstream f(testing_util::source_dir() + "/tests/golden/conv.json");
  EXPECT_TRUE(f.good()) << "missing fixture conv.json; run tests/golden/gen_golden_conv.py";
  return f.good() ? json::parse(f) : json{{"cases", json::array()}};
}

Tensor random(const Shape& s, uint64_t seed, DType dt = DType::f32) {
  Generator g(seed);
  std::vector<float> v(static_cast<size_t>(shape_numel(s)));
  for (auto& e : v) e = g.normal(0.f, 1.f);
  return Tensor::from_vector(v, s, dt);
}

// Runs a fixture case through autograd: conv2d (x, w[, b]) or max_pool2d (x).
Tensor run(const json& c, const std::vector<Tensor>& x) {
  const json& p = c["params"];
  if (c["op"] == "conv2d")
    return ag::conv2d(x[0], x[1], x.size() > 2 ? &x[2] : nullptr, p["stride"].get<int64_t>(),
                      p["padding"].get<int64_t>());
  return ag::max_pool2d(x[0], p["kernel"].get<int64_t>(), p["stride"].get<int64_t>());
}

void run_case(const json& c) {
  const DType dt = dtype_from_name(c["dtype"]);
  std::vector<Tensor> in;
  for (const auto& spec : c["inputs"]) {
    in.push_back(Tensor::from_vector(spec["data"].get<std::vector<float>>(), spec["shape"].get<Shape>(), dt));
    autograd::set_requires_grad(in.back(), true);
  }
  Tensor out = run(c, in);
  const float tol = Tolerance{}.of(dt);
  expect_close(out, c["out"], tol, "forward");
  Tensor up =
      Tensor::from_vector(c["upstream"]["data"].get<std::vector<float>>(), c["upstream"]["shape"].get<Shape>(), dt);
  autograd::backward(out, up);
  for (size_t i = 0; i < in.size(); ++i)
    expect_close(autograd::grad(in[i]), c["grads"][i], tol, "grad of input " + std::to_string(i));
}

class ConvGolden : public ::testing::TestWithParam<bool> {};  // the forced 16-bit fallback or not

TEST_P(ConvGolden, MatchesPyTorchForwardAndBackward) {
  const json doc = load_fixture();
  ASSERT_GT(doc["cases"].size(), 0u);
  ops::set_conv_lowp_fallback_for_testing(GetParam());
  const int64_t fallbacks = ops::conv_fallback_count();
  for (const json& c : doc["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>() + " (" + c["dtype"].get<std::string>() + ")");
    run_case(c);
  }
  ops::set_conv_lowp_fallback_for_testing(false);
  // f16 convolutions always fall back (oneDNN 2.6 has no f16 convolution on CPUs); bf16 only when forced
  // or where the CPU has no bf16 kernel.
  EXPECT_GT(ops::conv_fallback_count(), fallbacks);
}

INSTANTIATE_TEST_SUITE_P(Conv, ConvGolden, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "forced_fallback" : "native"; });

TEST(ConvGoldenFixture, CoversBothOpsInEveryDtype) {
  const json doc = load_fixture();
  std::set<std::string> seen;
  for (const json& c : doc["cases"]) seen.insert(c["op"].get<std::string>() + "/" + c["dtype"].get<std::string>());
  for (const char* op : {"conv2d", "max_pool2d"})
    for (const char* dt : {"f32", "bf16", "f16"})
      EXPECT_TRUE(seen.count(std::string(op) + "/" + dt)) << op << " " << dt;
}

// Pooling inputs made distinct (0.1 apart, shuffled), so a finite-difference step never moves the maximum.
void distinct(std::vector<float>& v) {
  std::vector<size_t> rank(v.size());
  std::iota(rank.begin(), rank.end(), size_t(0));
  std::sort(rank.begin(), rank.end(), [&](size_t a, size_t b) { return v[a] < v[b]; });
  for (size_t r = 0; r < rank.size(); ++r) v[rank[r]] = 0.1f * (float(r) - float(rank.size()) / 2);
}

TEST(ConvGradCheck, ConvolutionGradientsMatchFiniteDifferences) {
  struct Case {
    Shape x, w;
    int64_t stride, padding;
    bool bias;
  };
  for (const Case& c : {Case{{2, 3, 5, 5}, {4, 3, 3, 3}, 1, 1, true}, Case{{1, 2, 7, 6}, {3, 2, 3, 3}, 2, 0, true},
                        Case{{2, 1, 4, 5}, {2, 1, 2, 3}, 1, 2, false}, Case{{1, 3, 6, 6}, {2, 3, 1, 1}, 3, 0, true}}) {
    SCOPED_TRACE("x " + shape_str(c.x) + " w " + shape_str(c.w) + " stride " + std::to_string(c.stride) + " padding " +
                 std::to_string(c.padding));
    std::vector<Shape> shapes{c.x, c.w};
    if (c.bias) shapes.push_back({c.w[0]});
    for (const auto& b : ops::backends())
      if (backend_present(b))
        gradcheck(
          shapes,
          [&](const std::vector<Tensor>& x) {
            return ag::conv2d(x[0], x[1], x.size() > 2 ? &x[2] : nullptr, c.stride, c.padding);
          },
          {}, 1e-2f, b);
  }
}

TEST(ConvGradCheck, PoolingGradientsMatchFiniteDifferences) {
  struct Case {
    Shape x;
    int64_t k, s;
  };
  // 2x2 (the fast path), overlapping 3x3 windows, and an odd size that leaves a border unread.
  for (const Case& c : {Case{{2, 2, 4, 6}, 2, 2}, Case{{1, 2, 7, 7}, 3, 2}, Case{{1, 1, 5, 7}, 2, 3}}) {
    SCOPED_TRACE("x " + shape_str(c.x) + " k " + std::to_string(c.k) + " s " + std::to_string(c.s));
    for (const auto& b : ops::backends())
      if (backend_present(b))
        gradcheck(
          {c.x}, [&](const std::vector<Tensor>& x) { return ag::max_pool2d(x[0], c.k, c.s); }, {}, 1e-2f, b, distinct);
  }
}

// A conv feeding a pool feeding a conv: gradients flow through the whole stage.
TEST(ConvGradCheck, ConvPoolConvStageMatchesFiniteDifferences) {
  gradcheck(
      {{1, 2, 6, 6}, {3, 2, 3, 3}, {2, 3, 3, 3}},
      [](const std::vector<Tensor>& x) {
        return ag::conv2d(ag::max_pool2d(ag::conv2d(x[0], x[1], nullptr, 1, 1), 2, 2), x[2], nullptr, 1, 1);
      },
      {}, 1e-2f, "cpu");
}

// The weights' gradient without the input's: the first layer's input needs none.
TEST(Conv, InputWithoutGradGetsNoneAndWeightsStillDo) {
  Tensor x = random({2, 1, 6, 6}, 1), w = random({3, 1, 3, 3}, 2), b = random({3}, 3);
  autograd::set_requires_grad(w, true);
  autograd::set_requires_grad(b, true);
  autograd::backward(ag::sum(ag::conv2d(x, w, &b, 1, 1)));
  EXPECT_FALSE(autograd::grad(x).defined());
  ASSERT_TRUE(autograd::grad(w).defined());
  // d/db of the sum is the number of output positions per channel.
  for (float v : autograd::grad(b).to_vector()) EXPECT_FLOAT_EQ(v, 2 * 6 * 6);
}

TEST(Conv, StridedInputsGiveTheContiguousResult) {
  Tensor base = random({2, 3, 6, 5}, 4), w = random({4, 3, 3, 3}, 5);
  Tensor xt = base.transpose(2, 3);  // [2, 3, 5, 6], not contiguous
  ASSERT_FALSE(xt.is_contiguous());
  EXPECT_EQ(ops::conv2d(xt, w, nullptr, {1, 1}).to_vector(),
            ops::conv2d(xt.contiguous(), w, nullptr, {1, 1}).to_vector());
  EXPECT_EQ(ops::max_pool2d(xt, 2, 2).y.to_vector(), ops::max_pool2d(xt.contiguous(), 2, 2).y.to_vector());
}

TEST(Conv, EmptyBatchGivesEmptyOutputAndZeroWeightGradients) {
  Tensor x = Tensor::empty({0, 2, 5, 5}), w = random({3, 2, 3, 3}, 6);
  Tensor y = ops::conv2d(x, w, nullptr, {1, 0});
  EXPECT_EQ(y.shape(), (Shape{0, 3, 3, 3}));
  ops::Conv2dGrads g = ops::conv2d_backward(y, x, w, {1, 0}, true, true);
  EXPECT_EQ(g.dx.shape(), x.shape());
  for (float v : g.dw.to_vector()) EXPECT_EQ(v, 0.f);
  for (float v : g.db.to_vector()) EXPECT_EQ(v, 0.f);
  EXPECT_EQ(ops::max_pool2d(x, 2, 2).y.shape(), (Shape{0, 2, 2, 2}));
}

// The fallback widens to f32 and rounds once: exactly the f32 result rounded to bf16 or f16.
TEST(Conv, SixteenBitFallbackIsTheF32ResultRoundedOnce) {
  for (DType dt : {DType::bf16, DType::f16}) {
    Tensor x = random({2, 3, 6, 6}, 7, dt), w = random({5, 3, 3, 3}, 8, dt), b = random({5}, 9, dt);
    Tensor dy = random({2, 5, 3, 3}, 10, dt);
    ops::set_conv_lowp_fallback_for_testing(true);
    Tensor y = ops::conv2d(x, w, &b, {2, 1});
    ops::Conv2dGrads g = ops::conv2d_backward(dy, x, w, {2, 1}, true, true);
    ops::set_conv_lowp_fallback_for_testing(false);
    Tensor b32 = b.to(DType::f32);
    EXPECT_EQ(y.to_vector(), ops::conv2d(x.to(DType::f32), w.to(DType::f32), &b32, {2, 1}).to(dt).to_vector());
    ops::Conv2dGrads g32 =
        ops::conv2d_backward(dy.to(DType::f32), x.to(DType::f32), w.to(DType::f32), {2, 1}, true, true);
    EXPECT_EQ(g.dx.to_vector(), g32.dx.to(dt).to_vector());
    EXPECT_EQ(g.dw.to_vector(), g32.dw.to(dt).to_vector());
    EXPECT_EQ(g.db.to_vector(), g32.db.to(dt).to_vector());
    EXPECT_EQ(g.dx.dtype(), dt);
  }
}

// Where oneDNN has a bf16 kernel (AVX-512 BF16 or AMX), it agrees with f32 to bf16 precision.
TEST(Conv, NativeBf16AgreesWithF32) {
  if (!ops::conv_native(DType::bf16)) GTEST_SKIP() << "no oneDNN bf16 convolution on this CPU";
  Tensor x = random({4, 16, 8, 8}, 11, DType::bf16), w = random({32, 16, 3, 3}, 12, DType::bf16);
  const int64_t before = ops::conv_fallback_count();
  const std::vector<float> got = ops::conv2d(x, w, nullptr, {1, 1}).to_vector();
  EXPECT_EQ(ops::conv_fallback_count(), before);
  const std::vector<float> want = ops::conv2d(x.to(DType::f32), w.to(DType::f32), nullptr, {1, 1}).to_vector();
  float scale = 0;
  for (float v : want) scale = std::max(scale, std::fabs(v));
  for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-2f * scale) << i;
}

TEST(Conv, SteadyStateCreatesNoPrimitives) {
  Tensor x = random({3, 4, 9, 9}, 13), w = random({6, 4, 3, 3}, 14), b = random({6}, 15);
  autograd::set_requires_grad(x, true);
  autograd::set_requires_grad(w, true);
  autograd::set_requires_grad(b, true);
  auto step = [&] { autograd::backward(ag::sum(ag::max_pool2d(ag::conv2d(x, w, &b, 1, 1), 2, 2))); };
  step();
  const size_t warm = ops::conv_cache_size();
  EXPECT_GE(warm, 3u);  // forward, backward data, backward weights
  for (int i = 0; i < 3; ++i) step();
  EXPECT_EQ(ops::conv_cache_size(), warm);
  ops::conv2d(random({5, 4, 9, 9}, 16), w, &b, {1, 1});  // another batch size is another primitive
  EXPECT_EQ(ops::conv_cache_size(), warm + 1);
}

TEST(MaxPool, FirstMaximumInScanOrderWinsAndNaNPropagates) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  for (DType dt : {DType::f32, DType::bf16}) {
    SCOPED_TRACE(dtype_name(dt));
    // One 4x4 plane: ties, a NaN, and a window of -inf only; 2x2 windows (the fast path).
    Tensor x = Tensor::from_vector({1, 3, 5, 5, 3, 2, 5, 0, -1, nan, -inf, -inf, 7, -2, -inf, -inf}, {1, 1, 4, 4}, dt);
    ops::MaxPoolResult r = ops::max_pool2d(x, 2, 2);
    std::vector<float> y = r.y.to_vector(), am = r.argmax.to_vector();
    EXPECT_EQ(y[0], 3.f);
    EXPECT_EQ(am[0], 1.f);  // the 3 at index 1 comes before the 3 at index 4
    EXPECT_EQ(y[1], 5.f);
    EXPECT_EQ(am[1], 2.f);
    EXPECT_TRUE(std::isnan(y[2]));
    EXPECT_EQ(am[2], 9.f);
    EXPECT_EQ(y[3], -inf);
    EXPECT_EQ(am[3], 10.f);  // all -inf: the window's first element
    // 3x3 windows with stride 1 (the general path); every window holds the NaN at index 9.
    r = ops::max_pool2d(x, 3, 1);
    for (float v : r.y.to_vector()) EXPECT_TRUE(std::isnan(v));
    for (float v : r.argmax.to_vector()) EXPECT_EQ(v, 9.f);
    x = Tensor::from_vector({1, 3, 5, 5, 3, 2, 5, 0, -1, 4, -inf, -inf, 7, -2, -inf, -inf}, {1, 1, 4, 4}, dt);
    r = ops::max_pool2d(x, 3, 1);
    EXPECT_EQ(r.y.to_vector(), (std::vector<float>{5, 5, 7, 5}));
    EXPECT_EQ(r.argmax.to_vector(), (std::vector<float>{2, 2, 12, 6}));  // the first 5 of the ties
  }
}

TEST(MaxPool, OverlappingWindowsAddTheirGradients) {
  // x [1, 1, 3, 3] with its maximum in the centre: every 2x2 window (stride 1) picks it.
  Tensor x = Tensor::from_vector({0, 1, 0, 1, 9, 1, 0, 1, 0}, {1, 1, 3, 3});
  ops::MaxPoolResult r = ops::max_pool2d(x, 2, 1);
  for (DType dt : {DType::f32, DType::bf16}) {
    Tensor dx = ops::max_pool2d_backward(Tensor::from_vector({1, 2, 3, 4}, {1, 1, 2, 2}, dt), r, x.shape());
    EXPECT_EQ(dx.dtype(), dt);
    EXPECT_EQ(dx.to_vector(), (std::vector<float>{0, 0, 0, 0, 10, 0, 0, 0, 0}));
  }
}

TEST(ConvErrors, BadArgumentsNameTheOpAndTheShapes) {
  Tensor x = random({2, 3, 5, 5}, 17), w = random({4, 3, 3, 3}, 18);
  EXPECT_THAT(error_of([&] {
                ops::conv2d(random({3, 5, 5}, 1), w, nullptr, {});
              }),
              HasSubstr("[conv2d] x must be [N, C, H, W], got [3, 5, 5]"));
  EXPECT_THAT(error_of([&] {
                ops::conv2d(x, random({4, 3, 3}, 1), nullptr, {});
              }),
              HasSubstr("[conv2d] w must be [C_out, C_in, kH, kW]"));
  EXPECT_THAT(error_of([&] {
                ops::conv2d(x, random({4, 2, 3, 3}, 1), nullptr, {});
              }),
              HasSubstr("has 3 channels but w [4, 2, 3, 3] expects 2"));
  EXPECT_THAT(error_of([&] {
                ops::conv2d(x, random({4, 3, 7, 7}, 1), nullptr, {1, 0});
              }),
              HasSubstr("the 7x7 kernel is larger than the padded input 5x5"));
  EXPECT_NO_THROW(ops::conv2d(x, random({4, 3, 7, 7}, 1), nullptr, {1, 1}));  // padding makes room
  EXPECT_THAT(error_of([&] { ops::conv2d(x, w, nullptr, {0, 1}); }), HasSubstr("stride must be >= 1, got 0"));
  EXPECT_THAT(error_of([&] { ops::conv2d(x, w, nullptr, {1, -1}); }), HasSubstr("padding must be >= 0, got -1"));
  Tensor b = random({5}, 1);
  EXPECT_THAT(error_of([&] { ops::conv2d(x, w, &b, {}); }),
              HasSubstr("bias shape [5] does not match 4 output channels"));
  EXPECT_THAT(error_of([&] { ops::conv2d(x.to(DType::bf16), w, nullptr, {}); }), HasSubstr("dtypes differ"));
  EXPECT_THAT(error_of([&] {
                ops::conv2d(Tensor::zeros({1, 1, 3, 3}, DType::i32), w, nullptr, {});
              }),
              HasSubstr("dtype i32 is not supported"));
  EXPECT_THAT(error_of([&] {
                ops::conv2d_backward(random({2, 4, 4, 4}, 1), x, w, {1, 1}, true, false);
              }),
              HasSubstr("[conv2d_backward] dy [2, 4, 4, 4] does not match the output [2, 4, 5, 5]"));
}

TEST(ConvErrors, BadPoolingArgumentsAndIndicesAreRefused) {
  Tensor x = random({1, 2, 4, 4}, 19);
  EXPECT_THAT(error_of([&] {
                ops::max_pool2d(random({2, 4, 4}, 1), 2, 2);
              }),
              HasSubstr("[max_pool2d] x must be [N, C, H, W]"));
  EXPECT_THAT(error_of([&] { ops::max_pool2d(x, 0, 2); }), HasSubstr("kernel and stride must be >= 1"));
  EXPECT_THAT(error_of([&] { ops::max_pool2d(x, 2, 0); }), HasSubstr("kernel and stride must be >= 1"));
  EXPECT_THAT(error_of([&] { ops::max_pool2d(x, 5, 1); }), HasSubstr("the 5x5 window is larger than x [1, 2, 4, 4]"));
  ops::MaxPoolResult r = ops::max_pool2d(x, 2, 2);
  Tensor dy = random({1, 2, 2, 2}, 1);
  EXPECT_THAT(error_of([&] {
                ops::max_pool2d_backward(random({1, 2, 3, 2}, 1), r, x.shape());
              }),
              HasSubstr("dy [1, 2, 3, 2] and argmax [1, 2, 2, 2] differ"));
  EXPECT_THAT(error_of([&] {
                ops::max_pool2d_backward(dy, r, {1, 3, 4, 4});
              }),
              HasSubstr("x [1, 3, 4, 4] does not match the pooled [1, 2, 2, 2]"));
  ops::MaxPoolResult bad = r;
  bad.argmax = r.argmax.clone();
  bad.argmax.data<int32_t>()[5] = 16;
  EXPECT_THAT(error_of([&] { ops::max_pool2d_backward(dy, bad, x.shape()); }),
              HasSubstr("argmax 16 at flat position 5 is outside the 4x4 plane"));
  bad.argmax = Tensor();
  EXPECT_THAT(error_of([&] { ops::max_pool2d_backward(dy, bad, x.shape()); }), HasSubstr("argmax must be"));
}

}  // namespace
}  // namespace zt::test
