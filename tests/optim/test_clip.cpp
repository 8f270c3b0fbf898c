// Gradient-clipping helpers against direct computations, below and above the chunk grain.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "zt/core/parallel.h"
#include "zt/optim/clip.h"

namespace zt::optim {
namespace {

std::vector<float> ramp(int64_t n) {
  std::vector<float> g(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) g[size_t(i)] = std::sin(0.37f * float(i)) * (1.f + float(i % 13));
  return g;
}

double direct(const std::vector<float>& g) {
  long double s = 0;
  for (float x : g) s += (long double)x * x;
  return double(s);
}

TEST(Clip, SumOfSquaresBothSidesOfGrain) {
  for (int64_t n :
       {int64_t(0), int64_t(1), int64_t(7), int64_t(1000), kClipGrain, kClipGrain + 1, 5 * kClipGrain + 17}) {
    const auto g = ramp(n);
    const double want = direct(g);
    EXPECT_NEAR(sum_of_squares(g.data(), n), want, 1e-12 * std::max(1.0, want)) << "n=" << n;
  }
  const float three_four[] = {3.f, 4.f};
  EXPECT_EQ(sum_of_squares(three_four, 2), 25.0);
}

// The parallel path must not depend on the thread count (fixed chunking and order).
TEST(Clip, SumOfSquaresIndependentOfThreads) {
  const int64_t n = 7 * kClipGrain + 3;
  const auto g = ramp(n);
  const int saved = num_threads();
  set_num_threads(1);
  const double one = sum_of_squares(g.data(), n);
  set_num_threads(2);
  const double two = sum_of_squares(g.data(), n);
  set_num_threads(3);
  const double three = sum_of_squares(g.data(), n);
  set_num_threads(saved);
  EXPECT_EQ(one, two);
  EXPECT_EQ(one, three);
}

TEST(Clip, CoefficientMatchesTorch) {
  // torch.nn.utils.clip_grad_norm_: clip_coef = max_norm / (total_norm + 1e-6), clamped to 1.
  EXPECT_FLOAT_EQ(clip_coefficient(10.0, 1.0), float(1.0 / (10.0 + 1e-6)));
  EXPECT_FLOAT_EQ(clip_coefficient(2.0, 1.0), 0.49999975f);
  EXPECT_EQ(clip_coefficient(0.5, 1.0), 1.f);
  EXPECT_LT(clip_coefficient(1.0, 1.0), 1.f);  // the 1e-6 makes a norm equal to max_norm clip a hair
  EXPECT_EQ(clip_coefficient(0.0, 1.0), 1.f);
  EXPECT_EQ(clip_coefficient(1e9, 0.0), 1.f);  // disabled
  EXPECT_EQ(clip_coefficient(1e9, -1.0), 1.f);
  EXPECT_EQ(clip_coefficient(std::numeric_limits<double>::infinity(), 1.0), 0.f);
  EXPECT_TRUE(std::isnan(clip_coefficient(std::nan(""), 1.0)));
}

TEST(Clip, ScaleBothSidesOfGrain) {
  set_num_threads(2);
  for (int64_t n : {int64_t(5), 3 * kClipGrain + 1}) {
    auto g = ramp(n);
    const auto orig = g;
    scale_(g.data(), n, 0.25f);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(g[size_t(i)], orig[size_t(i)] * 0.25f) << "n=" << n << " i=" << i;
  }
}

}  // namespace
}  // namespace zt::optim
