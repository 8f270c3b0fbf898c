// Note [counter init] made fast: the Philox streams of random.h, a vector of counters at a time
// (GCC's vector extensions at the processor's width), with float log, sine and cosine of our own
// (Cephes' polynomials) in place of libm's scalar calls. Built with -O3 and no FMA contraction,
// so every processor and vector width computes the same bits (tests/core/random_test.cpp pins them).
// Internal functions pass vectors by value; no ABI crosses this file, so the width notes do not apply.
#pragma GCC diagnostic ignored "-Wpsabi"
// GCC 12 warns inside avx512fintrin.h's own _mm512_undefined (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "zt/core/random.h"

namespace zt {

std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> c, std::array<uint32_t, 2> k) {
  constexpr uint64_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = kM0 * c[0], p1 = kM1 * c[2];
    c = {uint32_t(p1 >> 32) ^ c[1] ^ k[0], uint32_t(p1), uint32_t(p0 >> 32) ^ c[3] ^ k[1], uint32_t(p0)};
    k = {k[0] + kW0, k[1] + kW1};
  }
  return c;
}

namespace {

#ifdef __AVX512F__
constexpr int kVectorBytes = 64;  // the processor's vector width (the build is -march=native)
#else
constexpr int kVectorBytes = 32;
#endif
constexpr int kLanes = kVectorBytes / 4;  // counters per vector
// GCC's vector extensions at the processor's width.
typedef uint32_t U32 __attribute__((vector_size(kVectorBytes)));
typedef int32_t I32 __attribute__((vector_size(kVectorBytes)));
typedef uint64_t U64 __attribute__((vector_size(kVectorBytes)));
typedef float F32 __attribute__((vector_size(kVectorBytes)));
struct Words {
  U32 w[4];  // word j of counter c + l in w[j][l]
};

// The 64-bit products m * x of each lane, even lanes and odd lanes apart, as vpmuludq computes
// them (GCC would otherwise build a 64-bit product by a constant from shifts and adds).
void mulhilo(uint32_t m, U32 x, U32& hi, U32& lo) {
  constexpr uint64_t kLow = 0xffffffffu;
#if defined(__AVX512F__)
  const U64 even = U64(_mm512_mul_epu32(__m512i(x), _mm512_set1_epi64(m)));
  const U64 odd = U64(_mm512_mul_epu32(_mm512_srli_epi64(__m512i(x), 32), _mm512_set1_epi64(m)));
#elif defined(__AVX2__)
  const U64 even = U64(_mm256_mul_epu32(__m256i(x), _mm256_set1_epi64x(m)));
  const U64 odd = U64(_mm256_mul_epu32(_mm256_srli_epi64(__m256i(x), 32), _mm256_set1_epi64x(m)));
#else
  const U64 even = (U64(x) & kLow) * m, odd = (U64(x) >> 32) * m;
#endif
  hi = U32((even >> 32) | (odd & ~kLow));
  lo = U32((even & kLow) | (odd << 32));
}

// Philox4x32-10 of counters c .. c + kLanes - 1 (the scalar philox4x32 above, lane by lane).
Words philox_block(uint64_t c, uint32_t k0, uint32_t k1) {
  U32 x0, x1, x2 = U32{}, x3 = U32{};
  for (int l = 0; l < kLanes; ++l) x0[l] = uint32_t(c + uint64_t(l)), x1[l] = uint32_t((c + uint64_t(l)) >> 32);
  for (int round = 0; round < 10; ++round) {
    U32 hi0, lo0, hi1, lo1;
    mulhilo(0xD2511F53u, x0, hi0, lo0);
    mulhilo(0xCD9E8D57u, x2, hi1, lo1);
    x0 = hi1 ^ x1 ^ k0, x1 = lo1, x2 = hi0 ^ x3 ^ k1, x3 = lo0;
    k0 += 0x9E3779B9u, k1 += 0xBB67AE85u;
  }
  return {{x0, x1, x2, x3}};
}

F32 unit(U32 w) {
  return __builtin_convertvector(I32(w >> 8), F32) * (1.f / 16777216.f);
}  // [0, 1), 24 bits as torch's float draws

// Natural log of x in [2^-24, 1] (Cephes logf: x = m 2^e with m in [sqrt(1/2), sqrt(2)), a
// degree-9 polynomial in m - 1, ln 2 in two parts); within 2 ulp.
F32 log_unit(F32 x) {
  const U32 bits = U32(x);
  const I32 low = (F32((bits & 0x007fffffu) | 0x3f000000u) < 0.707106781186547524f);  // -1 where m < sqrt(1/2)
  const I32 e = I32(bits >> 23) - 126 + low;
  const F32 m = F32((bits & 0x007fffffu) | (0x3f000000u + (U32(low) & 0x00800000u)));  // [sqrt(1/2), sqrt(2))
  const F32 f = m - 1.f, z = f * f, fe = __builtin_convertvector(e, F32);
  F32 y = 7.0376836292e-2f * f - 1.1514610310e-1f;
  y = y * f + 1.1676998740e-1f;
  y = y * f - 1.2420140846e-1f;
  y = y * f + 1.4249322787e-1f;
  y = y * f - 1.6668057665e-1f;
  y = y * f + 2.0000714765e-1f;
  y = y * f - 2.4999993993e-1f;
  y = y * f + 3.3333331174e-1f;
  y = y * f * z;
  y += -2.12194440e-4f * fe;
  y += -0.5f * z;
  return (f + y) + 0.693359375f * fe;
}

// sin and cos of 2 pi w24 / 2^24 for 24-bit w24: the octant is the top 3 bits, so reducing to
// [0, pi/4] is exact integer arithmetic; then Cephes' sinf/cosf polynomials and a rotation.
void sincos_turn(U32 w24, F32& sin_out, F32& cos_out) {
  const U32 octant = w24 >> 21, r = w24 & 0x1fffffu;
  const I32 odd = I32((octant & 1u) != 0);  // -1 or 0
  const F32 a = __builtin_convertvector(I32(odd ? 0x200000u - r : r), F32) * (0.78539816339744830962f / 2097152.f);
  const F32 z = a * a;
  const F32 s = ((-1.9515295891e-4f * z + 8.3321608736e-3f) * z - 1.6666654611e-1f) * z * a + a;
  const F32 c =
      ((2.443315711809948e-5f * z - 1.388731625493765e-3f) * z + 4.166664568298827e-2f) * z * z - 0.5f * z + 1.f;
  const F32 sa = odd ? -s : s;  // the angle is q pi/2 plus sa's angle, q the quarter turn
  const U32 q = ((octant + 1u) >> 1) & 3u;
  sin_out = q == 0 ? sa : q == 1 ? c : q == 2 ? -sa : -c;
  cos_out = q == 0 ? c : q == 1 ? -sa : q == 2 ? -c : sa;
}

// Values [begin, end) of a stream into out: blocks of kBlockValues from kBlockCounters counters
// (random.h), kLanes counters at a time: make(words, dst) writes word j's values at dst[16 j + l].
template <typename Make>
void fill_blocks(uint64_t key, float* out, int64_t begin, int64_t end, Make make) {
  static_assert(kBlockCounters % kLanes == 0);
  alignas(64) float edge[kBlockValues];
  for (int64_t first = begin / kBlockValues * kBlockValues; first < end; first += kBlockValues) {
    const bool inside = first >= begin && first + kBlockValues <= end;
    float* dst = inside ? out + (first - begin) : edge;
    for (int h = 0; h < kBlockCounters; h += kLanes)
      make(philox_block(uint64_t(first / 4 + h), uint32_t(key), uint32_t(key >> 32)), dst + h);
    if (inside) continue;
    const int64_t lo = std::max(begin, first), hi = std::min(end, first + kBlockValues);
    std::memcpy(out + (lo - begin), edge + (lo - first), size_t(hi - lo) * sizeof(float));
  }
}

void store(F32 v, float* dst) { std::memcpy(dst, &v, sizeof v); }

}  // namespace

void counter_uniform(uint64_t key, float lo, float hi, float* out, int64_t begin, int64_t end) {
  const float span = hi - lo;
  fill_blocks(key, out, begin, end, [lo, span](const Words& w, float* dst) {
    for (int j = 0; j < 4; ++j) store(lo + span * unit(w.w[j]), dst + kBlockCounters * j);
  });
}

void counter_normal(uint64_t key, float mean, float stddev, float* out, int64_t begin, int64_t end) {
  fill_blocks(key, out, begin, end, [mean, stddev](const Words& w, float* dst) {
    for (int j = 0; j < 4; j += 2) {  // Box-Muller on words j, j + 1; 1-u keeps log's argument in (0, 1]
      F32 r = -2.f * log_unit(1.f - unit(w.w[j])), s, c;
      for (int l = 0; l < kLanes; ++l) r[l] = stddev * std::sqrt(r[l]);
      sincos_turn(w.w[j + 1] >> 8, s, c);
      store(mean + r * c, dst + kBlockCounters * j);
      store(mean + r * s, dst + kBlockCounters * (j + 1));
    }
  });
}

}  // namespace zt
