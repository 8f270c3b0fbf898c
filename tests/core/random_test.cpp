// Note [counter init]: Philox4x32-10 against Random123's known answers, and the counter
// streams' values independent of how a range is split.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <vector>

#include "zt/core/random.h"

namespace zt {
namespace {

TEST(Philox, MatchesRandom123KnownAnswers) {
  using W4 = std::array<uint32_t, 4>;
  EXPECT_EQ(philox4x32({0, 0, 0, 0}, {0, 0}), (W4{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(philox4x32({~0u, ~0u, ~0u, ~0u}, {~0u, ~0u}), (W4{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(philox4x32({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}),
            (W4{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

// Any range, split anywhere (inside a counter's four values or a Box-Muller pair), gives the same values.
TEST(CounterStreams, AnySplitGivesTheSameValues) {
  constexpr int64_t n = 1001;
  std::vector<float> whole_u(n), whole_n(n);
  counter_uniform(7, -1.f, 1.f, whole_u.data(), 0, n);
  counter_normal(7, 0.f, 1.f, whole_n.data(), 0, n);
  for (int64_t cut : {1, 2, 64, 100, 333, 500, 1000}) {
    std::vector<float> u(n), g(n);
    counter_uniform(7, -1.f, 1.f, u.data(), 0, cut);
    counter_uniform(7, -1.f, 1.f, u.data() + cut, cut, n);
    counter_normal(7, 0.f, 1.f, g.data(), 0, cut);
    counter_normal(7, 0.f, 1.f, g.data() + cut, cut, n);
    EXPECT_EQ(u, whole_u) << "cut " << cut;
    EXPECT_EQ(g, whole_n) << "cut " << cut;
  }
  float one = 0;
  counter_normal(7, 0.f, 1.f, &one, 529, 530);  // one element inside a block: a pair's sine
  EXPECT_EQ(one, whole_n[529]);
}

TEST(CounterStreams, HaveTheRequestedMomentsAndKeysDiffer) {
  constexpr int64_t n = 200000;
  std::vector<float> u(n), g(n), other(n);
  counter_uniform(11, -0.5f, 0.5f, u.data(), 0, n);
  counter_normal(11, 1.f, 0.02f, g.data(), 0, n);
  counter_normal(12, 1.f, 0.02f, other.data(), 0, n);
  double su = 0, suu = 0, sg = 0, sgg = 0;
  float lo = 1, hi = -1;
  for (int64_t i = 0; i < n; ++i) {
    su += u[size_t(i)], suu += double(u[size_t(i)]) * u[size_t(i)];
    lo = std::min(lo, u[size_t(i)]), hi = std::max(hi, u[size_t(i)]);
    sg += g[size_t(i)], sgg += (g[size_t(i)] - 1.0) * (g[size_t(i)] - 1.0);
  }
  EXPECT_NEAR(su / n, 0.0, 0.005);
  EXPECT_NEAR(suu / n, 1.0 / 12, 0.002);  // U(-1/2, 1/2): variance 1/12
  EXPECT_GE(lo, -0.5f);
  EXPECT_LT(hi, 0.5f);
  EXPECT_GT(hi - lo, 0.999f);
  EXPECT_NEAR(sg / n, 1.0, 0.0002);
  EXPECT_NEAR(std::sqrt(sgg / n), 0.02, 0.0002);
  EXPECT_NE(g, other);
}

// The vectorised polynomials against double-precision Box-Muller of the same Philox words.
TEST(CounterStreams, NormalsMatchDoubleBoxMullerOfTheSameWords) {
  constexpr int64_t n = 1 << 18;
  std::vector<float> g(n);
  counter_normal(3, 0.f, 1.f, g.data(), 0, n);
  double worst = 0;
  for (int64_t c = 0; 4 * c < n; ++c) {
    const auto w = philox4x32({uint32_t(c), 0, 0, 0}, {3, 0});
    const size_t at = size_t(c / kBlockCounters * kBlockValues + c % kBlockCounters);  // value of word 0
    for (size_t j = 0; j < 4; j += 2) {
      const double r = std::sqrt(-2.0 * std::log(1.0 - (w[j] >> 8) / 16777216.0));
      const double a = 2 * M_PI * (w[j + 1] >> 8) / 16777216.0;
      worst = std::max(worst, std::abs(g[at + kBlockCounters * j] - r * std::cos(a)));
      worst = std::max(worst, std::abs(g[at + kBlockCounters * (j + 1)] - r * std::sin(a)));
    }
  }
  EXPECT_LT(worst, 2e-6);  // 6.6e-7 measured, values up to about 5.5
}

// Note [counter init]: initial weights must not depend on the processor or its vector width
// (counter_random.cpp has no FMA contraction and no libm); a hash of both streams pins the bits.
TEST(CounterStreams, SameBitsOnEveryProcessor) {
  constexpr int64_t n = 1 << 16;
  std::vector<float> g(n), u(n);
  counter_normal(0x123456789abcdefull, 0.5f, 0.02f, g.data(), 3, n + 3);
  counter_uniform(99, -0.1f, 0.3f, u.data(), 0, n);
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the bits
  for (const auto* v : {&g, &u})
    for (float x : *v) h = (h ^ std::bit_cast<uint32_t>(x)) * 1099511628211ull;
  EXPECT_EQ(h, 0xa5e381fde736b305ull) << std::hex << h;
}

}  // namespace
}  // namespace zt
