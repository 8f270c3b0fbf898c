// Note [block quantization]: packet sizes, the rounding bound, both widths, odd lengths, the
// nibble signs, zero blocks and non-finite blocks.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "zt/ops/compress.h"
#include "op_table.h"
#include "zt/core/random.h"
#include "zt/ops/ops.h"

using namespace zt;
using namespace zt::ops;
using zt::test::backend_present;
using zt::test::on_backend;
using zt::test::backend_device;

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

namespace {

std::vector<int32_t> words_of(const Tensor& packet) {
  const Tensor host = packet.to(Device::cpu());
  const auto* p = static_cast<const int32_t*>(host.raw_data());
  return {p, p + host.numel()};
}

}  // namespace

// Every backend's kernels (sim, and cuda where a GPU is present) write the CPU's packets and
// values bit for bit: both widths, every dtype, a short last block, a non-finite block.
TEST(BlockQuantization, EveryBackendMatchesTheCpuBitForBit) {
  std::vector<float> v = random_values(3 * kQuantBlock + 7, 11, 0.5f).to_vector();
  v[kQuantBlock + 5] = NAN;
  const Tensor x32 = Tensor::from_vector(v, {int64_t(v.size())});
  for (const std::string& b : ops::backends()) {
    if (b == "cpu" || !backend_present(b)) continue;
    for (int bits : {4, 8})
      for (DType d : {DType::f32, DType::bf16, DType::f16}) {
        SCOPED_TRACE(b + ", " + std::to_string(bits) + " bits, " + dtype_name(d));
        const Tensor x = x32.to(d);
        const int64_t n = x.numel(), words = packet_words(n, bits);
        Tensor want = Tensor::empty({words}, DType::i32), got = Tensor::empty({words}, DType::i32, backend_device(b));
        quantize_into(x, bits, want);
        quantize_into(on_backend(x, b), bits, got);
        ASSERT_EQ(words_of(got), words_of(want));
        Tensor out_cpu = Tensor::empty({n}, d), out_dev = Tensor::empty({n}, d, backend_device(b));
        dequantize_into(want, bits, out_cpu);
        dequantize_into(got, bits, out_dev);
        Tensor acc_cpu = Tensor::full({n}, 0.25f), acc_dev = on_backend(acc_cpu, b);
        dequantize_add(want, bits, acc_cpu);
        dequantize_add(got, bits, acc_dev);
        const std::vector<float> a = out_cpu.to_vector(), c = out_dev.to_vector();
        const std::vector<float> s = acc_cpu.to_vector(), t = acc_dev.to_vector();
        // Bits, but any NaN for a NaN: IEEE leaves their payloads to the hardware (an x86 product
        // keeps its operand's, a GPU's is canonical).
        const auto same = [](float x, float y) { return std::memcmp(&x, &y, 4) == 0 || (std::isnan(x) && std::isnan(y)); };
        for (size_t i = 0; i < a.size(); ++i) {
          ASSERT_TRUE(same(a[i], c[i])) << "value " << i << ": " << a[i] << " against " << c[i];
          ASSERT_TRUE(same(s[i], t[i])) << "sum " << i << ": " << s[i] << " against " << t[i];
        }
      }
  }
}

// The sparse rows' sum: rows at their ids in order, padding skipped, a repeated id summed, the
// destination range cutting a row in two, one fp32 division; every backend as the CPU.
TEST(AverageRows, SumsRowsInOrderOverTheRangeAndDivides) {
  const int64_t V = 5, C = 3, offset = 2;
  const Tensor ids = Tensor::from_ints({4, -1, 1, 4}, {4});
  const Tensor rows = Tensor::from_vector({1, 2, 3, 9, 9, 9, 10, 20, 30, 0.5f, 0.25f, 0.125f}, {12});
  const int64_t dst_begin = offset + 1 * C + 1, len = 4 * C;  // from the middle of row 1
  std::vector<float> want(size_t(len), 0.f);
  auto place = [&](int64_t id, const float* r) {
    for (int64_t c = 0; c < C; ++c) {
      const int64_t x = offset + id * C + c - dst_begin;
      if (x >= 0 && x < len) want[size_t(x)] += r[c];
    }
  };
  const std::vector<float> r = rows.to_vector();
  place(4, &r[0]);
  place(1, &r[6]);
  place(4, &r[9]);
  for (float& w : want) w /= 3.f;
  Tensor out = Tensor::empty({len}, DType::f32);
  average_rows_into(ids, rows, offset, V, C, dst_begin, 3.f, out);
  EXPECT_EQ(out.to_vector(), want);
  for (const std::string& b : ops::backends())
    if (b != "cpu" && backend_present(b)) {
      Tensor dev = Tensor::empty({len}, DType::f32, backend_device(b));
      average_rows_into(on_backend(ids, b), on_backend(rows, b), offset, V, C, dst_begin, 3.f, dev);
      EXPECT_EQ(dev.to_vector(), want) << b;
    }
  const Tensor bad = Tensor::from_ints({0, 5, -1, -1}, {4});  // row 5 of 5
  EXPECT_THROW(average_rows_into(bad, rows, offset, V, C, dst_begin, 3.f, out), Error);
  EXPECT_THROW(average_rows_into(ids, rows.slice(0, 0, 9), offset, V, C, dst_begin, 3.f, out), Error);
}

// add_average_rows_into is average_rows_into cast to the wire and added with axpy_, touching only
// the rows' positions: bit for bit against that composition for every destination and wire dtype,
// on every backend (the repeated id, the padding and the cut row as above).
TEST(AddAverageRows, EqualsTheDenseAverageCastToTheWireAndAdded) {
  const int64_t V = 5, C = 3, offset = 2;
  const Tensor ids = Tensor::from_ints({4, -1, 1, 4}, {4});
  const Tensor rows = Tensor::from_vector({1.1f, 2, 3, 9, 9, 9, 10, 20.3f, 30, 0.5f, 0.25f, 0.1f}, {12});
  const int64_t dst_begin = offset + 1 * C + 1, len = 4 * C;
  std::vector<float> start(static_cast<size_t>(len));
  for (int64_t i = 0; i < len; ++i) start[size_t(i)] = 0.37f * float(i + 1) - 1.9f;  // no zeros: x + 0 is x
  for (DType dt : {DType::f32, DType::bf16, DType::f16})
    for (DType wire : {DType::f32, DType::bf16, DType::f16}) {
      Tensor want = ops::cast(Tensor::from_vector(start, {len}), dt), avg = Tensor::empty({len}, DType::f32);
      average_rows_into(ids, rows, offset, V, C, dst_begin, 3.f, avg);
      ops::axpy_(want, 1.f, ops::cast(avg, wire));
      for (const std::string& b : ops::backends())
        if (backend_present(b)) {
          Tensor got = on_backend(ops::cast(Tensor::from_vector(start, {len}), dt), b);
          add_average_rows_into(on_backend(ids, b), on_backend(rows, b), offset, V, C, dst_begin, 3.f, wire, got);
          const Tensor host = got.to(Device::cpu());
          EXPECT_EQ(std::memcmp(host.raw_data(), want.raw_data(), size_t(want.nbytes())), 0)
              << b << ": " << dtype_name(dt) << " over a " << dtype_name(wire) << " wire";
        }
    }
  Tensor out = Tensor::zeros({len}, DType::f32);
  const Tensor bad = Tensor::from_ints({0, 5, -1, -1}, {4});  // row 5 of 5
  EXPECT_THROW(add_average_rows_into(bad, rows, offset, V, C, dst_begin, 3.f, DType::f32, out), Error);
  EXPECT_THROW(add_average_rows_into(ids, rows.slice(0, 0, 9), offset, V, C, dst_begin, 3.f, DType::f32, out), Error);
}
