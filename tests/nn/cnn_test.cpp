// Conv2d, MaxPool2d, Flatten and make_cnn: parameter names and shapes (torchvision's
// features.N / classifier.N), torch's default initialisation, deferred init, input layouts, and
// that a small CNN learns.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "common/error_of.h"
#include "zt/autograd/autograd.h"
#include "zt/autograd/functions.h"
#include "zt/nn/conv.h"
#include "zt/ops/ops.h"

namespace zt::nn {
namespace {

using ::testing::HasSubstr;
using testing_util::error_of;

TEST(Cnn, ParametersAreNamedAsTorchvisionWithTheSeedsShapes) {
  auto m = make_cnn(1, 32, {64, 128, 256}, {1024}, 10, 1);
  std::vector<std::pair<std::string, Shape>> want{
      {"features.0.weight", {64, 1, 3, 3}},    {"features.0.bias", {64}},
      {"features.3.weight", {128, 64, 3, 3}},  {"features.3.bias", {128}},
      {"features.6.weight", {256, 128, 3, 3}}, {"features.6.bias", {256}},
      {"classifier.0.weight", {1024, 4096}},   {"classifier.0.bias", {1024}},
      {"classifier.2.weight", {10, 1024}},     {"classifier.2.bias", {10}}};
  const auto got = m->named_parameters();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].first, want[i].first);
    EXPECT_EQ(got[i].second.shape(), want[i].second) << want[i].first;
  }
  EXPECT_EQ(m->num_parameters(), 4575242);
  // ZeRO-3 units: every layer that owns parameters.
  EXPECT_EQ(m->zero_units().size(), 5u);
}

TEST(Cnn, ConvolutionsStartAsTorchDoes) {
  Generator gen(3);
  Conv2d conv(8, 4, 3, 1, 1, true, gen);
  const float bound = 1.f / std::sqrt(8.f * 9.f);
  for (const Tensor& p : {conv.weight, conv.bias}) {
    float most = 0;
    for (float v : p.to_vector()) {
      EXPECT_LE(std::fabs(v), bound);
      most = std::max(most, std::fabs(v));
    }
    EXPECT_GT(most, 0.5f * bound);  // uniform over the range, not a narrower one
  }
  // The same seed gives the same model; another seed another.
  auto a = make_cnn(1, 8, {4}, {}, 3, 5), b = make_cnn(1, 8, {4}, {}, 3, 5), c = make_cnn(1, 8, {4}, {}, 3, 6);
  EXPECT_EQ(a->parameters()[0].to_vector(), b->parameters()[0].to_vector());
  EXPECT_NE(a->parameters()[0].to_vector(), c->parameters()[0].to_vector());
}

// Note [deferred init]: shapes only, and materialising gives eager's values.
TEST(Cnn, DeferredInitGivesTheEagerValues) {
  auto eager = make_cnn(3, 16, {4, 8}, {12}, 5, 9);
  std::shared_ptr<Module> lazy;
  {
    DeferredInit defer;
    lazy = make_cnn(3, 16, {4, 8}, {12}, 5, 9);
  }
  const auto inits = lazy->deferred_initializers();
  const auto want = eager->named_parameters();
  const auto got = lazy->named_parameters();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    Tensor p = got[i].second;
    ASSERT_FALSE(p.has_storage()) << got[i].first;
    Tensor values = Tensor::empty(p.shape());
    run_init(inits.at(p.impl()), values, 0);
    EXPECT_EQ(values.to_vector(), want[i].second.to_vector()) << got[i].first;
  }
}

TEST(Cnn, TakesFlatRowsOrImagesAndRefusesOtherShapes) {
  auto m = make_cnn(2, 8, {4, 4}, {6}, 3, 1);
  autograd::NoGradGuard no_grad;
  Tensor img = Tensor::full({5, 2, 8, 8}, 0.5f);
  Tensor rows = img.reshape({5, 128});
  EXPECT_EQ((*m)(img).shape(), (Shape{5, 3}));
  EXPECT_EQ((*m)(rows).to_vector(), (*m)(img).to_vector());
  EXPECT_THAT(error_of([&] {
                (*m)(Tensor::zeros({5, 100}));
              }),
              HasSubstr("[Cnn] input [5, 100] is neither [B, 128] nor [B, 2, 8, 8]"));
  EXPECT_THAT(error_of([&] { (*m)(Tensor::zeros({5, 1, 8, 8})); }), HasSubstr("neither"));
}

TEST(Cnn, SizesThatCannotMakeOneAreRefused) {
  EXPECT_THAT(error_of([] {
                make_cnn(1, 4, {2, 2, 2}, {}, 3, 1);
              }),
              HasSubstr("a 4x4 image is too small for 3 2x2 pooling stages"));
  EXPECT_NO_THROW(make_cnn(1, 4, {2, 2}, {}, 3, 1));  // 4 -> 2 -> 1
  EXPECT_THAT(error_of([] { make_cnn(1, 8, {}, {}, 3, 1); }), HasSubstr("channels non-empty"));
  EXPECT_THAT(error_of([] { make_cnn(0, 8, {2}, {}, 3, 1); }), HasSubstr("in_channels=0"));
  Generator gen(1);
  EXPECT_THAT(error_of([&] { Conv2d(1, 2, 3, 0, 0, true, gen); }), HasSubstr("stride must be >= 1"));
  EXPECT_THAT(error_of([&] { Conv2d(1, 0, 3, 1, 0, true, gen); }), HasSubstr("sizes must be positive"));
  EXPECT_THAT(error_of([] { MaxPool2d(0); }), HasSubstr("kernel must be >= 1"));
}

TEST(Layers, FlattenAndPoolingModules) {
  Flatten flat;
  Tensor x = Tensor::from_vector(std::vector<float>(2 * 3 * 2 * 2, 1.f), {2, 3, 2, 2});
  autograd::set_requires_grad(x, true);
  Tensor y = flat(x);
  EXPECT_EQ(y.shape(), (Shape{2, 12}));
  autograd::backward(ag::sum(y));
  EXPECT_EQ(autograd::grad(x).shape(), x.shape());  // the gradient takes x's shape back
  EXPECT_EQ(flat(Tensor::zeros({0, 3, 2})).shape(), (Shape{0, 6}));
  EXPECT_THAT(error_of([&] { flat(Tensor::zeros({4})); }), HasSubstr("[Flatten] needs [B, ...]"));
  MaxPool2d pool(2);  // stride defaults to the kernel, as torch's
  EXPECT_EQ(pool(Tensor::zeros({1, 1, 6, 6})).shape(), (Shape{1, 1, 3, 3}));
  MaxPool2d overlapping(3, 1);
  EXPECT_EQ(overlapping(Tensor::zeros({1, 1, 6, 6})).shape(), (Shape{1, 1, 4, 4}));
}

// A small CNN learns to tell a bright left half from a bright right half with plain SGD.
TEST(Cnn, LearnsASeparableTask) {
  auto m = make_cnn(1, 8, {4, 8}, {16}, 2, 11);
  Generator g(12);
  const int64_t n = 32;
  std::vector<float> xs(size_t(n * 64));
  std::vector<int32_t> ys(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    ys[size_t(i)] = int32_t(i % 2);
    for (int64_t p = 0; p < 64; ++p)
      xs[size_t(i * 64 + p)] = g.normal(0.f, 0.3f) + (((p % 8) < 4) == (i % 2 == 0) ? 1.f : 0.f);
  }
  const Tensor x = Tensor::from_vector(xs, {n, 64}), y = Tensor::from_ints(ys, {n});
  auto loss_now = [&] { return ag::cross_entropy((*m)(x), y); };
  float first = 0, last = 0;
  for (int step = 0; step < 80; ++step) {  // seeds 1-15 all end below 1% of their first loss
    for (Tensor& p : m->parameters()) autograd::set_grad(p, Tensor());
    Tensor loss = loss_now();
    (step == 0 ? first : last) = loss.item();
    autograd::backward(loss);
    for (Tensor& p : m->parameters()) ops::axpy_(p, -0.1f, autograd::grad(p));
  }
  EXPECT_LT(last, 0.25f * first);
  autograd::NoGradGuard no_grad;
  EXPECT_EQ(ops::count_correct((*m)(x), y), n);
}

}  // namespace
}  // namespace zt::nn
