// Views share storage with the right strides; contiguous() copies only when needed; copies
// between strided views and dtypes; bf16 rounding.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <numeric>

#include "zt/core/random.h"
#include "zt/core/tensor.h"

namespace zt {
namespace {

Tensor iota(const Shape& s) {
  std::vector<float> v(static_cast<size_t>(shape_numel(s)));
  std::iota(v.begin(), v.end(), 0.f);
  return Tensor::from_vector(v, s);
}

TEST(Tensor, ContiguousStrides) {
  EXPECT_EQ(contiguous_strides({2, 3, 4}), (Shape{12, 4, 1}));
  EXPECT_EQ(contiguous_strides({}), (Shape{}));
  Tensor s = Tensor::zeros({});
  EXPECT_EQ(s.numel(), 1);
}

TEST(Tensor, TransposeSharesStorage) {
  Tensor a = iota({2, 3});
  Tensor t = a.transpose(0, 1);
  EXPECT_EQ(t.shape(), (Shape{3, 2}));
  EXPECT_EQ(t.strides(), (Shape{1, 3}));
  EXPECT_EQ(t.storage(), a.storage());
  EXPECT_FALSE(t.is_contiguous());
  EXPECT_EQ(t.to_vector(), (std::vector<float>{0, 3, 1, 4, 2, 5}));
  a.data<float>()[1] = 42.f;  // visible through the view
  EXPECT_EQ(t.to_vector()[2], 42.f);
}

TEST(Tensor, SliceAndSelect) {
  Tensor a = iota({3, 4});
  Tensor s = a.slice(1, 1, 3);
  EXPECT_EQ(s.shape(), (Shape{3, 2}));
  EXPECT_EQ(s.strides(), (Shape{4, 1}));
  EXPECT_EQ(s.offset(), 1);
  EXPECT_EQ(s.storage(), a.storage());
  EXPECT_EQ(s.to_vector(), (std::vector<float>{1, 2, 5, 6, 9, 10}));
  Tensor r = a.select(0, 2);
  EXPECT_EQ(r.shape(), (Shape{4}));
  EXPECT_EQ(r.offset(), 8);
  EXPECT_TRUE(r.is_contiguous());
  Tensor c = a.select(1, 3);
  EXPECT_EQ(c.strides(), (Shape{4}));
  EXPECT_EQ(c.to_vector(), (std::vector<float>{3, 7, 11}));
  EXPECT_THROW(a.slice(0, 2, 5), Error);
  EXPECT_THROW(a.select(2, 0), Error);
  EXPECT_THROW(a.select(0, 3), Error);
  EXPECT_EQ(a.slice(1, -2, 4).to_vector(), (std::vector<float>{2, 3, 6, 7, 10, 11}));  // negative start
}

TEST(Tensor, ReshapeViewsOrCopies) {
  Tensor a = iota({2, 6});
  Tensor v = a.reshape({3, -1});
  EXPECT_EQ(v.shape(), (Shape{3, 4}));
  EXPECT_EQ(v.storage(), a.storage());  // contiguous: a view
  Tensor t = a.transpose(0, 1);
  Tensor r = t.reshape({12});
  EXPECT_NE(r.storage(), a.storage());  // strided: a copy in logical order
  EXPECT_EQ(r.to_vector(), t.to_vector());
  EXPECT_THROW(t.view({12}), Error);
  EXPECT_THROW(a.view({5, -1}), Error);
  EXPECT_THROW(a.view({-1, -1}), Error);
}

TEST(Tensor, ContiguousCopiesOnlyWhenNeeded) {
  Tensor a = iota({3, 4});
  EXPECT_TRUE(a.contiguous().same(a));
  Tensor row = a.slice(0, 1, 2);  // one row: contiguous despite the offset
  EXPECT_TRUE(row.is_contiguous());
  EXPECT_TRUE(row.contiguous().same(row));
  Tensor col = a.slice(1, 1, 2);  // [3, 1] column: not contiguous
  EXPECT_FALSE(col.is_contiguous());
  Tensor cc = col.contiguous();
  EXPECT_NE(cc.storage(), a.storage());
  EXPECT_TRUE(cc.is_contiguous());
  EXPECT_EQ(cc.to_vector(), (std::vector<float>{1, 5, 9}));
}

TEST(Tensor, CopyBetweenStridedViews) {
  Tensor src = iota({3, 4});
  Tensor dst = Tensor::zeros({4, 3});
  dst.copy_(src.transpose(0, 1));
  EXPECT_EQ(dst.to_vector(), src.transpose(0, 1).to_vector());
  // Write into a strided destination: a column of a bigger tensor.
  Tensor big = Tensor::zeros({3, 4});
  Tensor column = big.slice(1, 2, 3);
  column.copy_(Tensor::from_vector({7, 8, 9}, {3, 1}));
  EXPECT_EQ(big.to_vector(), (std::vector<float>{0, 0, 7, 0, 0, 0, 8, 0, 0, 0, 9, 0}));
  EXPECT_THROW(big.copy_(Tensor::zeros({4, 3})), Error);
  // Converting copies between dtypes, through strides.
  Tensor b16 = Tensor::zeros({4, 3}, DType::bf16);
  b16.copy_(src.transpose(0, 1));
  EXPECT_EQ(b16.to_vector(), src.transpose(0, 1).to_vector());
  Tensor ints = Tensor::from_ints({1, 2, 3}, {3});
  EXPECT_EQ(ints.to(DType::f32).to_vector(), (std::vector<float>{1, 2, 3}));
}

TEST(Tensor, FillAndZeroStrided) {
  Tensor a = iota({2, 3});
  Tensor t = a.transpose(0, 1).slice(0, 1, 2);  // elements 1 and 4
  t.fill_(-1.f);
  EXPECT_EQ(a.to_vector(), (std::vector<float>{0, -1, 2, 3, -1, 5}));
  a.slice(1, 0, 1).zero_();
  EXPECT_EQ(a.to_vector(), (std::vector<float>{0, -1, 2, 0, -1, 5}));
  EXPECT_THROW(a.item(), Error);
  EXPECT_EQ(Tensor::full({1}, 2.5f).item(), 2.5f);
}

uint16_t bits(float f) { return float_to_bf16(f).bits; }
float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

TEST(Bf16, RoundToNearestEven) {
  EXPECT_EQ(bits(1.0f), 0x3f80);
  // Halfway between 0x3f80 and 0x3f81: ties go to the even one (down).
  EXPECT_EQ(bits(from_bits(0x3f808000u)), 0x3f80);
  // Halfway between 0x3f81 and 0x3f82: ties go to the even one (up).
  EXPECT_EQ(bits(from_bits(0x3f818000u)), 0x3f82);
  EXPECT_EQ(bits(from_bits(0x3f808001u)), 0x3f81);  // just above halfway rounds up
  EXPECT_EQ(bits(from_bits(0x3f807fffu)), 0x3f80);  // just below rounds down
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(NAN))));
  EXPECT_TRUE(std::isinf(bf16_to_float(float_to_bf16(INFINITY))));
  EXPECT_EQ(bf16_to_float(float_to_bf16(-2.5f)), -2.5f);
}

// The branch-free rounding against the rule spelled out on the bits: truncate, then add one
// when the dropped half is above a tie or a tie with an odd kept half; NaN keeps its sign and
// becomes quiet. Every 65,521st pattern of all 2^32 and every kept half's ties and neighbours.
TEST(Bf16, BranchFreeRoundingMatchesTheRuleOnEveryClass) {
  auto want = [](uint32_t u) -> uint16_t {
    const uint16_t hi = uint16_t(u >> 16), lo = uint16_t(u & 0xffffu);
    if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t(hi | 0x40u);
    return uint16_t(hi + ((lo > 0x8000u || (lo == 0x8000u && (hi & 1u))) ? 1 : 0));
  };
  int64_t bad = 0;
  auto check = [&](uint32_t u) {
    if (bits(from_bits(u)) != want(u) && ++bad <= 5) ADD_FAILURE() << std::hex << "pattern 0x" << u;
  };
  for (uint64_t u = 0; u <= 0xffffffffu; u += 65521) check(uint32_t(u));
  for (uint32_t hi = 0; hi <= 0xffffu; ++hi)
    for (uint32_t lo : {0x0000u, 0x0001u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu}) check(hi << 16 | lo);
  EXPECT_EQ(bad, 0);
  EXPECT_EQ(bits(from_bits(0x7f7fffffu)), 0x7f80);  // the largest float rounds to inf
}

TEST(Bf16, RoundTripThroughTensors) {
  std::vector<float> v{0.f, 1.f, -3.140625f, 1e-3f, 65504.f, 1.00390625f};
  Tensor t = Tensor::from_vector(v, {6}, DType::bf16);
  auto back = t.to_vector();
  for (size_t i = 0; i < v.size(); ++i) {
    EXPECT_NEAR(back[i], v[i], std::fabs(v[i]) / 256) << i;
    EXPECT_EQ(bf16_to_float(float_to_bf16(back[i])), back[i]);  // representable values are exact
  }
  EXPECT_EQ(back[5], 1.0f);  // 1 + 2^-8 is a tie: rounds to the even 1.0
  EXPECT_EQ(t.to(DType::f32).to(DType::bf16).to_vector(), back);
}

// f16 against the compiler's own _Float16 conversions (IEEE round-to-nearest-even).
TEST(F16, EveryHalfRoundTripsAndMatchesTheCompiler) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const f16 h{uint16_t(b)};
    const float f = f16_to_float(h);
    _Float16 ref;
    std::memcpy(&ref, &h.bits, 2);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(float(ref)));
      continue;
    }
    EXPECT_EQ(f, float(ref)) << b;
    EXPECT_EQ(float_to_f16(f).bits, b) << b;
  }
}

TEST(F16, RoundingOfFloatsMatchesTheCompiler) {
  Generator gen(5);
  for (int i = 0; i < 200000; ++i) {
    uint32_t u = uint32_t(gen.next_u64());
    if (i % 2) u = (u & 0x8fffffffu) | 0x30000000u;  // half the draws near the half range
    float f;
    std::memcpy(&f, &u, 4);
    if (std::isnan(f)) continue;
    const _Float16 ref = _Float16(f);
    uint16_t rb;
    std::memcpy(&rb, &ref, 2);
    ASSERT_EQ(float_to_f16(f).bits, rb) << f;
  }
  // Every class at its boundaries: subnormal/normal, overflow to inf, inf, NaN payloads, ties.
  auto check = [](uint32_t x) {
    float f;
    std::memcpy(&f, &x, 4);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(f16_to_float(float_to_f16(f))));
      return;
    }
    const _Float16 ref = _Float16(f);
    uint16_t rb;
    std::memcpy(&rb, &ref, 2);
    ASSERT_EQ(float_to_f16(f).bits, rb) << std::hex << "float 0x" << x;
  };
  for (uint32_t edge : {0x38800000u, 0x477ff000u, 0x7f800000u, 0x33000000u, 0x33000001u})
    for (uint32_t d = 0; d < 64; ++d) check(edge - 32 + d), check((edge - 32 + d) | 0x80000000u);
  for (uint32_t m = 0; m < (1u << 13); ++m) check(0x3f800000u | m);  // every rounding of a mantissa tail
  Tensor t = Tensor::from_vector({1.f, -65504.f, 1e-7f, 70000.f}, {4}, DType::f16);
  EXPECT_EQ(t.to_vector()[0], 1.f);
  EXPECT_EQ(t.to_vector()[1], -65504.f);
  EXPECT_TRUE(std::isinf(t.to_vector()[3]));
}

}  // namespace
}  // namespace zt
