// Note [block quantization]: packet sizes, the rounding bound, both widths, odd lengths, the
// nibble signs, zero blocks and non-finite blocks.
#include <gtest/gtest.h>

#include <cmath>

#include "quantize.h"
#include "zt/core/random.h"

using namespace zt;
using namespace zt::zero;

namespace {

Tensor random_values(int64_t n, uint64_t seed, float spread) {
  Generator g(seed);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = g.normal(0.f, spread);
  return Tensor::from_vector(v, {n});
}

std::vector<float> roundtrip(const Tensor& x, int bits) {
  Tensor packet = Tensor::empty({packet_words(x.numel(), bits)}, DType::i32);
  quantize_into(x, bits, packet);
  Tensor out = Tensor::empty({x.numel()}, DType::f32);
  dequantize_into(packet, bits, out);
  return out.to_vector();
}

}  // namespace

TEST(BlockQuantization, PacketIsScalesThenCodesInWholeWords) {
  EXPECT_EQ(packet_words(256, 8), (4 + 256) / 4);
  EXPECT_EQ(packet_words(257, 8), (8 + 257 + 3) / 4);  // a second block for one value
  EXPECT_EQ(packet_words(256, 4), (4 + 128) / 4);
  EXPECT_EQ(packet_words(1, 4), 2);  // 4 bytes of scale, 1 of codes, padded
  EXPECT_THROW(packet_words(10, 3), Error);
}

// Nearest rounding: each value within half a step (its block's largest magnitude / 127 or / 7).
TEST(BlockQuantization, EveryValueWithinHalfAStepOfItsBlock) {
  for (int bits : {8, 4})
    for (int64_t n : {int64_t(1), int64_t(255), int64_t(256), int64_t(1000)})
      for (DType d : {DType::f32, DType::bf16, DType::f16}) {
        const Tensor x32 = random_values(n, uint64_t(n * bits), 0.3f);
        const Tensor x = d == DType::f32 ? x32 : x32.to(d);
        const std::vector<float> in = x.to_vector(), got = roundtrip(x, bits);
        for (int64_t b = 0; b < n; b += kQuantBlock) {
          float amax = 0;
          for (int64_t i = b; i < std::min(n, b + kQuantBlock); ++i) amax = std::max(amax, std::fabs(in[size_t(i)]));
          const float step = amax / (bits == 8 ? 127.f : 7.f);
          for (int64_t i = b; i < std::min(n, b + kQuantBlock); ++i)
            ASSERT_LE(std::fabs(got[size_t(i)] - in[size_t(i)]), 0.5f * step * (1 + 1e-5f) + 1e-30f)
                << bits << " bits, n " << n << ", " << dtype_name(d) << ", element " << i;
        }
      }
}

// Values on the grid come back exactly, negative nibbles included; a zero block stays zero.
TEST(BlockQuantization, GridValuesAndZeroBlocksAreExact) {
  for (int bits : {4, 8}) {
    const int q = bits == 8 ? 127 : 7;
    const float step = bits == 8 ? 0.0625f : 0.5f;  // the block's largest magnitude / q, exactly
    std::vector<float> v;
    for (int k = -q; k <= q; ++k) v.push_back(float(k) * step);
    v.resize(kQuantBlock, 0.f);
    v.resize(2 * kQuantBlock + 3, 0.f);  // a second block of zeros, and a short third one
    v.back() = -1.f;
    const Tensor x = Tensor::from_vector(v, {int64_t(v.size())});
    EXPECT_EQ(roundtrip(x, bits), v) << bits << " bits";
  }
}

// fp16's overflow check must still see an overflowed gradient after quantization.
TEST(BlockQuantization, NonFiniteBlockDecodesToNanAndSparesTheOthers) {
  std::vector<float> v(2 * kQuantBlock, 1.f);
  v[3] = INFINITY;
  const Tensor x = Tensor::from_vector(v, {int64_t(v.size())});
  for (int bits : {4, 8}) {
    const std::vector<float> got = roundtrip(x, bits);
    for (int64_t i = 0; i < kQuantBlock; ++i) ASSERT_TRUE(std::isnan(got[size_t(i)]));
    for (int64_t i = kQuantBlock; i < 2 * kQuantBlock; ++i) ASSERT_EQ(got[size_t(i)], 1.f);
  }
}

TEST(BlockQuantization, DequantizeAddAccumulatesInF32) {
  const Tensor x = random_values(300, 7, 1.f);
  Tensor packet = Tensor::empty({packet_words(300, 8)}, DType::i32);
  quantize_into(x, 8, packet);
  Tensor acc = Tensor::full({300}, 2.f);
  dequantize_add(packet, 8, acc);
  const std::vector<float> once = roundtrip(x, 8), got = acc.to_vector();
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], once[i] + 2.f, 1e-6f);  // may fuse
  Tensor wrong = Tensor::empty({packet_words(300, 8) - 1}, DType::i32);
  EXPECT_THROW(dequantize_add(wrong, 8, acc), Error);
}
