// The whole-buffer precision ops (cast, cast_into, scale_, axpy_, sum_of_squares,
// has_nonfinite) against scalar references built from core's conversions, on both sides of
// the parallel grain, for every pair of float dtypes.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "common/error_of.h"
#include "zt/core/parallel.h"
#include "zt/core/random.h"
#include "zt/ops/ops.h"
#include "zt/optim/clip.h"

namespace zt {
namespace {

template <typename F>
void expect_error(F f, const std::string& needle) {
  const std::string msg = testing_util::error_of(f);
  EXPECT_NE(msg.find(needle), std::string::npos) << msg;
}

const DType kFloats[] = {DType::f32, DType::bf16, DType::f16};
const int64_t kSizes[] = {1000, 3 * ops::kGrain + 77};  // one thread / several chunks

// Values that exercise rounding: ties, subnormals of both 16-bit types, overflow, inf, NaN.
std::vector<float> tricky(int64_t n, uint64_t seed) {
  Generator g(seed);
  std::vector<float> v(static_cast<size_t>(n));
  const float special[] = {0.f,
                           -0.f,
                           1.f + 1.f / 256,
                           1.f + 3.f / 2048,
                           6e-8f,
                           3e-5f,
                           1e-39f,
                           65519.f,
                           65520.f,
                           7e4f,
                           std::numeric_limits<float>::infinity(),
                           -std::numeric_limits<float>::infinity(),
                           std::numeric_limits<float>::quiet_NaN()};
  for (int64_t i = 0; i < n; ++i) {
    const int64_t k = i % 40;
    v[size_t(i)] = k < 13 ? special[k] : g.normal(0.f, 100.f);
  }
  return v;
}

// Rounds through core's scalar conversion (the reference every kernel must equal).
float round_to(float v, DType dt) {
  if (dt == DType::bf16) return bf16_to_float(float_to_bf16(v));
  if (dt == DType::f16) return f16_to_float(float_to_f16(v));
  return v;
}

void expect_same_bits(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const bool same = std::memcmp(&got[i], &want[i], 4) == 0 || (std::isnan(got[i]) && std::isnan(want[i]));
    if (!same && bad++ < 5) ADD_FAILURE() << what << " [" << i << "]: got " << got[i] << ", want " << want[i];
  }
}

TEST(Precision, CastEqualsScalarRoundingForEveryDtypePair) {
  for (int64_t n : kSizes)
    for (DType from : kFloats)
      for (DType to : kFloats) {
        const auto v = tricky(n, 1);
        Tensor x = Tensor::from_vector(v, {n}, from);
        Tensor y = ops::cast(x, to);
        EXPECT_EQ(y.dtype(), to);
        EXPECT_FALSE(y.same(x));
        std::vector<float> want(v.size());
        for (size_t i = 0; i < v.size(); ++i) want[i] = round_to(round_to(v[i], from), to);
        expect_same_bits(y.to_vector(), want,
                         std::string(dtype_name(from)) + "->" + dtype_name(to) + " n=" + std::to_string(n));
      }
}

// Note [streamed stores], both sides: a destination of 4 MiB or more is streamed out; at an
// aligned start and one element off it (copied, not streamed), the values are the scalar ones.
TEST(Precision, LargeCastsStreamTheSameValues) {
  const int64_t n = (int64_t(4) << 20) / 2 + 1000;  // bf16: just past 4 MiB; f32: 8 MiB
  const auto v = tricky(n + 1, 2);
  for (DType from : kFloats)
    for (DType to : kFloats) {
      if (from == to) continue;
      Tensor x = Tensor::from_vector(v, {n + 1}, from);
      std::vector<float> want(size_t(n + 1));
      for (size_t i = 0; i < want.size(); ++i) want[i] = round_to(round_to(v[i], from), to);
      for (int64_t start : {0, 1}) {
        Tensor flat = Tensor::zeros({n + 1}, to);
        Tensor dst = flat.slice(0, start, start + n), src = x.slice(0, start, start + n);
        ops::cast_into(dst, src);
        expect_same_bits(dst.to_vector(), std::vector<float>(want.begin() + start, want.begin() + start + n),
                         std::string(dtype_name(from)) + "->" + dtype_name(to) + " from " + std::to_string(start));
      }
    }
}

TEST(Precision, CastOfEveryF16ValueIsExact) {
  std::vector<float> all(65536);
  Tensor h = Tensor::empty({65536}, DType::f16);
  for (int i = 0; i < 65536; ++i) h.data<f16>()[i] = f16{uint16_t(i)};
  Tensor f = ops::cast(h, DType::f32);
  for (int i = 0; i < 65536; ++i) all[size_t(i)] = f16_to_float(f16{uint16_t(i)});
  expect_same_bits(f.to_vector(), all, "f16->f32");
  Tensor back = ops::cast(f, DType::f16);
  int bad = 0;
  for (int i = 0; i < 65536; ++i) {
    const uint16_t b = back.data<f16>()[i].bits;
    const bool nan = (i & 0x7c00) == 0x7c00 && (i & 0x3ff);
    const bool ok = nan ? (b & 0x7c00) == 0x7c00 && (b & 0x3ff) : b == i;
    if (!ok) {
      EXPECT_LT(bad++, 1) << "f16 bits " << i << " -> " << b;
    }
  }
}

// Note [processor cap]: every f16 vector path this processor may run gives the scalar path's bits,
// for every f16 value and for f32 values around every rounding case (ties, subnormals, overflow, NaN).
TEST(Precision, EveryF16VectorPathEqualsTheScalarPath) {
  std::vector<float> wide;
  for (uint32_t i = 0; i < 65536; ++i) {
    const float v = f16_to_float(f16{uint16_t(i)});
    wide.push_back(v);
    const uint32_t b = std::bit_cast<uint32_t>(v);
    for (uint32_t d : {0x1000u, 0xfffu, 0x1001u, 0x800u}) wide.push_back(std::bit_cast<float>(b + d));  // halfway +-1
  }
  for (float v : {65504.f, 65520.f, 65519.f, 1e9f, 5.96e-8f, 2.98e-8f, 2.99e-8f, -0.f}) wide.push_back(v);
  Tensor h = Tensor::empty({65536}, DType::f16);
  for (int i = 0; i < 65536; ++i) h.data<f16>()[i] = f16{uint16_t(i)};
  const Tensor f = Tensor::from_vector(wide, {int64_t(wide.size())});
  ops::force_f16_path_for_testing(ops::F16Path::scalar);
  const std::vector<float> up = ops::cast(h, DType::f32).to_vector();
  const Tensor down = ops::cast(f, DType::f16);
  const std::vector<ops::F16Path> paths = ops::f16_paths();
  EXPECT_EQ(paths.front(), ops::F16Path::scalar);
  for (ops::F16Path p : paths) {
    ops::force_f16_path_for_testing(p);
    expect_same_bits(ops::cast(h, DType::f32).to_vector(), up, "f16->f32, path " + std::to_string(int(p)));
    const Tensor d = ops::cast(f, DType::f16);
    int64_t differ = 0;
    for (int64_t i = 0; i < d.numel(); ++i) differ += d.data<f16>()[i].bits != down.data<f16>()[i].bits;
    EXPECT_EQ(differ, 0) << "f32->f16, path " << int(p);
  }
  ops::force_f16_path_for_testing(std::nullopt);
  std::printf("[ isa      ] %s%s: %zu f16 paths\n", ops::cpu_isa().name.c_str(),
              ops::cpu_isa().cap.empty() ? "" : (" capped by " + ops::cpu_isa().cap).c_str(), paths.size());
}

TEST(Precision, CastOfStridedInputAndIntoAnotherShape) {
  Tensor x = Tensor::from_vector({1, 2, 3, 4, 5, 6}, {2, 3}).transpose(0, 1);  // [3, 2] strided
  Tensor y = ops::cast(x, DType::f16);
  EXPECT_EQ(y.shape(), (Shape{3, 2}));
  EXPECT_EQ(y.to_vector(), (std::vector<float>{1, 4, 2, 5, 3, 6}));
  Tensor flat = Tensor::zeros({6}, DType::bf16);
  ops::cast_into(flat, x);
  EXPECT_EQ(flat.to_vector(), (std::vector<float>{1, 4, 2, 5, 3, 6}));
}

TEST(Precision, ErrorsNameTheOp) {
  Tensor strided = Tensor::zeros({2, 3}).transpose(0, 1);
  expect_error([&] { ops::cast_into(strided, Tensor::zeros({6})); },
               "[cast_into] destination of shape [3, 2] must be contiguous");
  Tensor d = Tensor::zeros({5});
  expect_error([&] { ops::cast_into(d, Tensor::zeros({6})); }, "[cast_into] destination [5] has 5 elements");
  expect_error([&] { ops::cast(Tensor::zeros({2}), DType::i32); }, "[cast] dtype i32 is not supported");
  expect_error([&] { ops::scale_(strided, 2.f); }, "[scale_] tensor of shape [3, 2] must be contiguous");
  expect_error([&] { ops::axpy_(d, 1.f, Tensor::zeros({4})); }, "[axpy_] destination [5] and source [4] differ");
  expect_error([] { ops::has_nonfinite(Tensor::from_ints({1}, {1})); }, "[has_nonfinite] dtype i32");
}

TEST(Precision, ScaleRoundsOnceInEveryDtype) {
  for (int64_t n : kSizes)
    for (DType dt : kFloats) {
      Generator g(2);
      std::vector<float> v(static_cast<size_t>(n));
      for (auto& e : v) e = round_to(g.normal(0.f, 10.f), dt);
      Tensor x = Tensor::from_vector(v, {n}, dt);
      ops::scale_(x, 0.3f);
      std::vector<float> want(v.size());
      for (size_t i = 0; i < v.size(); ++i) want[i] = round_to(v[i] * 0.3f, dt);
      expect_same_bits(x.to_vector(), want, std::string("scale_ ") + dtype_name(dt) + " n=" + std::to_string(n));
    }
}

TEST(Precision, AxpyAccumulatesAcrossDtypesInF32) {
  for (int64_t n : kSizes)
    for (DType dd : kFloats)
      for (DType sd : kFloats) {
        Generator g(3);
        std::vector<float> d(static_cast<size_t>(n)), s(static_cast<size_t>(n));
        for (auto& e : d) e = round_to(g.normal(0.f, 1.f), dd);
        for (auto& e : s) e = round_to(g.normal(0.f, 1.f), sd);
        Tensor dst = Tensor::from_vector(d, {n}, dd), src = Tensor::from_vector(s, {n}, sd);
        ops::axpy_(dst, -0.7f, src);
        std::vector<float> want(d.size());
        for (size_t i = 0; i < d.size(); ++i) {
          const float prod = -0.7f * s[i];  // separate statements: no fused multiply-add
          want[i] = round_to(d[i] + prod, dd);
        }
        const std::string what = std::string("axpy_ ") + dtype_name(dd) + " += " + dtype_name(sd);
        expect_same_bits(dst.to_vector(), want, what + " n=" + std::to_string(n));
        ops::add_(dst, src);
        for (size_t i = 0; i < d.size(); ++i) want[i] = round_to(want[i] + s[i], dd);
        expect_same_bits(dst.to_vector(), want, "add_ after " + what);
      }
}

TEST(Precision, SumOfSquaresIsIndependentOfThreadCount) {
  const int saved = num_threads();
  for (int64_t n : {ops::kReduceChunk - 3, 5 * ops::kReduceChunk + 3})
    for (DType dt : kFloats) {
      Generator g(4);
      std::vector<float> v(static_cast<size_t>(n));
      for (auto& e : v) e = g.normal(0.f, 2.f);
      Tensor x = Tensor::from_vector(v, {n}, dt);
      set_num_threads(1);
      const double one = ops::sum_of_squares(x);
      for (int t : {2, 3, 4}) {
        set_num_threads(t);
        const double many = ops::sum_of_squares(x);
        EXPECT_EQ(std::memcmp(&one, &many, sizeof(double)), 0) << dtype_name(dt) << " n=" << n << " threads " << t;
      }
      double ref = 0;
      for (float e : x.to_vector()) ref += double(e) * double(e);
      EXPECT_NEAR(one, ref, 1e-12 * ref) << dtype_name(dt);
      if (dt == DType::f32) {
        EXPECT_EQ(one, optim::sum_of_squares(v.data(), n)) << "same chunking as optim";
      } else {  // the same lanes in the same order as the f32 sum of the same values
        EXPECT_EQ(one, ops::sum_of_squares(ops::cast(x, DType::f32))) << dtype_name(dt);
      }
    }
  set_num_threads(saved);
  EXPECT_EQ(ops::sum_of_squares(Tensor::zeros({0})), 0.0);
}

TEST(Precision, HasNonfiniteFindsInfAndNanAnywhere) {
  for (int64_t n : kSizes)
    for (DType dt : kFloats) {
      Tensor x = Tensor::from_vector(std::vector<float>(size_t(n), 1.f), {n}, dt);
      EXPECT_FALSE(ops::has_nonfinite(x)) << dtype_name(dt);
      for (float bad : {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::quiet_NaN()})
        for (int64_t at : {int64_t(0), n / 2, n - 1}) {
          Tensor y = x.clone();
          y.slice(0, at, at + 1).fill_(bad);
          EXPECT_TRUE(ops::has_nonfinite(y)) << dtype_name(dt) << " n=" << n << " at " << at;
        }
    }
  // fp16 overflow: 7e4 is finite in f32 and bf16 but inf once cast to f16.
  Tensor big = Tensor::from_vector({1.f, 7e4f}, {2});
  EXPECT_FALSE(ops::has_nonfinite(big));
  EXPECT_FALSE(ops::has_nonfinite(ops::cast(big, DType::bf16)));
  EXPECT_TRUE(ops::has_nonfinite(ops::cast(big, DType::f16)));
  EXPECT_FALSE(ops::has_nonfinite(Tensor::zeros({0})));
}

}  // namespace
}  // namespace zt
