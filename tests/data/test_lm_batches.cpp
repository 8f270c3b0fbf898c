// LM batches: windows and targets, the global batch laid out across ranks (any world size sees
// the same), the step as the data position, and the validation windows.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <numeric>
#include <set>

#include "common/error_of.h"
#include "zt/data/lm_batches.h"

namespace zt::data {
namespace {

using ::testing::HasSubstr;
using testing_util::error_kind_of;
using testing_util::error_of;

std::vector<uint16_t> iota_tokens(size_t n) {
  std::vector<uint16_t> t(n);
  for (size_t i = 0; i < n; ++i) t[i] = uint16_t((i * 7 + 3) % 1000);
  return t;
}

std::vector<int32_t> rows(const Tensor& t) { return {t.data<int32_t>(), t.data<int32_t>() + t.numel()}; }

TEST(LmWindows, CountIsTokensMinusOneOverT) {
  EXPECT_EQ(lm_window_count(0, 4), 0);
  EXPECT_EQ(lm_window_count(1, 4), 0);
  EXPECT_EQ(lm_window_count(4, 4), 0);
  EXPECT_EQ(lm_window_count(5, 4), 1);
  EXPECT_EQ(lm_window_count(9, 4), 2);  // windows [0,5) and [4,9) share token 4
  EXPECT_EQ(lm_window_count(12, 4), 2);
}

TEST(LmWindows, YIsXShiftedByOne) {
  const std::vector<uint16_t> t = iota_tokens(20);
  const LmBatch b = lm_batch(t, 4, {2, 0});
  EXPECT_EQ(b.x.shape(), (Shape{2, 4}));
  EXPECT_EQ(b.x.dtype(), DType::i32);
  EXPECT_EQ(rows(b.x), (std::vector<int32_t>{t[8], t[9], t[10], t[11], t[0], t[1], t[2], t[3]}));
  EXPECT_EQ(rows(b.y), (std::vector<int32_t>{t[9], t[10], t[11], t[12], t[1], t[2], t[3], t[4]}));
  EXPECT_THROW(lm_batch(t, 4, {4}), Error);  // (20 - 1) / 4 = 4 windows: 0..3
}

TEST(LmBatchesTest, EveryWorldSizeSeesTheSameGlobalBatch) {
  const std::vector<uint16_t> t = iota_tokens(1000);
  const int64_t T = 8, global = 12;
  LmBatches one(t, T, {global, 1, 1, 0}, 42);
  for (int world : {1, 2, 3, 4}) {
    for (int64_t accum : {1, 3}) {
      if (global % (world * accum)) continue;
      const int64_t micro = global / (world * accum);
      for (int64_t step : {0, 5, 11, 23}) {  // across epochs: 124 windows / 12 = 10 steps each
        std::vector<int32_t> x(size_t(global * T)), y(size_t(global * T));
        for (int r = 0; r < world; ++r) {
          LmBatches src(t, T, {micro, accum, world, r}, 42);
          for (int64_t m = 0; m < accum; ++m) {
            const LmBatch b = src.micro_batch(step, m);
            ASSERT_EQ(b.x.shape(), (Shape{micro, T}));
            const int64_t row = (m * world + r) * micro;  // Note [global batch layout]
            std::copy_n(b.x.data<int32_t>(), micro * T, x.begin() + row * T);
            std::copy_n(b.y.data<int32_t>(), micro * T, y.begin() + row * T);
          }
        }
        const LmBatch g = one.global_batch(step);
        EXPECT_EQ(x, rows(g.x)) << "world " << world << " accumulation " << accum << " step " << step;
        EXPECT_EQ(y, rows(g.y));
      }
    }
  }
}

TEST(LmBatchesTest, AnEpochVisitsEveryWindowOnceAndEpochsDiffer) {
  const int64_t T = 4;
  const std::vector<uint16_t> t(41, 0);  // 10 windows
  StepSampler s(lm_window_count(41, T), {2, 1, 2, 0}, 7, true);
  ASSERT_EQ(s.steps_per_epoch(), 2);  // 10 / 4, the tail of 2 dropped
  std::vector<int64_t> e0, e1;
  for (int64_t step = 0; step < 2; ++step) {
    auto g = s.global_batch(step);
    e0.insert(e0.end(), g.begin(), g.end());
    g = s.global_batch(step + 2);
    e1.insert(e1.end(), g.begin(), g.end());
  }
  EXPECT_EQ(std::set<int64_t>(e0.begin(), e0.end()).size(), 8u);
  EXPECT_NE(e0, e1);
}

TEST(LmBatchesTest, ThePositionIsTheStepAlone) {
  const std::vector<uint16_t> t = iota_tokens(500);
  LmBatches a(t, 5, {3, 2, 2, 1}, 9), b(t, 5, {3, 2, 2, 1}, 9);
  for (int64_t step = 0; step < 6; ++step) a.micro_batch(step, 1);  // a has been running; b starts at 6
  EXPECT_EQ(rows(a.micro_batch(6, 1).x), rows(b.micro_batch(6, 1).x));
  EXPECT_NE(rows(a.micro_batch(6, 0).x), rows(a.micro_batch(7, 0).x));
  LmBatches other_seed(t, 5, {3, 2, 2, 1}, 10);
  EXPECT_NE(rows(other_seed.micro_batch(0, 0).x), rows(b.micro_batch(0, 0).x));
}

TEST(LmBatchesTest, WithoutShuffleWindowsComeInOrder) {
  const std::vector<uint16_t> t = iota_tokens(100);
  LmBatches s(t, 3, {2, 1, 1, 0}, 1, /*shuffle=*/false);
  EXPECT_EQ(rows(s.micro_batch(1, 0).x), rows(lm_batch(t, 3, {2, 3}).x));
}

TEST(LmBatchesTest, TooFewTokensOrTooLargeABatchIsNamed) {
  const std::vector<uint16_t> t = iota_tokens(8);
  EXPECT_EQ(error_kind_of([&] { LmBatches(t, 8, {1, 1, 1, 0}, 0, true, "val.bin"); }), ErrorKind::data);
  EXPECT_THAT(error_of([&] {
                LmBatches(t, 8, {1, 1, 1, 0}, 0, true, "val.bin");
              }),
              HasSubstr("val.bin has 8 tokens, fewer than one window of 9"));
  LmBatches ok(t, 7, {1, 1, 1, 0}, 0);  // exactly one window: both sides of the bound
  EXPECT_EQ(ok.num_windows(), 1);
  EXPECT_EQ(error_kind_of([&] { LmBatches(t, 3, {2, 1, 2, 0}, 0); }), ErrorKind::config);
  EXPECT_THAT(error_of([&] {
                LmBatches(t, 3, {2, 1, 2, 0}, 0, true, "t.bin");
              }),
              HasSubstr("the global batch of 4 (micro 2 x accumulation 1 x world 2) exceeds the 2 windows of 4 tokens "
                        "in t.bin"));
  EXPECT_EQ(error_kind_of([&] { LmBatches(t, 3, {1, 1, 2, 2}, 0); }), ErrorKind::invalid_argument);
}

TEST(LmBatchesTest, TokenRangeCheckNamesTheTokenAndItsByteOffset) {
  std::vector<uint16_t> t = {1, 2, 50256, 50257};
  EXPECT_NO_THROW(check_token_range(t, 50258, "s.bin"));
  EXPECT_EQ(error_kind_of([&] { check_token_range(t, 50257, "s.bin"); }), ErrorKind::data);
  EXPECT_THAT(
      error_of([&] { check_token_range(t, 50257, "s.bin"); }),
      HasSubstr("s.bin: token 3 (byte offset 1030 in a token shard) is 50257, outside the vocabulary of 50257"));
}

TEST(LmEval, FirstKWindowsInOrderWithAShortLastBatch) {
  const std::vector<uint16_t> t = iota_tokens(50);  // 49 / 4 = 12 windows
  LmEvalWindows all(t, 4);
  EXPECT_EQ(all.size(), 12);
  LmEvalWindows five(t, 4, 5);
  EXPECT_EQ(five.size(), 5);
  EXPECT_EQ(five.num_batches(2), 3);
  EXPECT_EQ(rows(five.batch(0, 2).x), rows(lm_batch(t, 4, {0, 1}).x));
  const LmBatch last = five.batch(2, 2);
  EXPECT_EQ(last.x.shape(), (Shape{1, 4}));
  EXPECT_EQ(rows(last.y), rows(lm_batch(t, 4, {4}).y));
  EXPECT_EQ(five.num_batches(5), 1);  // exactly full
  EXPECT_EQ(LmEvalWindows(t, 4, 100).size(), 12);
  EXPECT_THROW(five.batch(3, 2), Error);
}

}  // namespace
}  // namespace zt::data
