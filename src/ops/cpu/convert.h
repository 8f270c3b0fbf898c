#pragma once
// Vectorised block conversion between f32 and the 16-bit float types, with the same results
// as core's scalar conversions (round to nearest even, NaN stays NaN, overflow to inf).
// Kernels compute in f32 on blocks of kBlock values and round once on the way out.
#include <bit>
#include <cstdint>
#include <cstring>

#if defined(__AVX512F__) || defined(__F16C__)
#include <immintrin.h>
#endif

#include "zt/core/dtype.h"

namespace zt::ops::cpu {

// Values per conversion block: the block buffers live on the stack and stay in L1.
constexpr int64_t kBlock = 512;

inline void to_f32(const float* src, float* dst, int64_t n) { std::memcpy(dst, src, size_t(n) * 4); }

inline void to_f32(const bf16* src, float* __restrict dst, int64_t n) {
  const uint16_t* __restrict s = reinterpret_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = std::bit_cast<float>(uint32_t(s[i]) << 16);
}

inline void to_f32(const f16* src, float* __restrict dst, int64_t n) {
  int64_t i = 0;
#if defined(__AVX512F__)
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(dst + i,
                     _mm512_maskz_cvtph_ps(0xffff, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i))));
#elif defined(__F16C__)
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
#endif
  for (; i < n; ++i) dst[i] = f16_to_float(src[i]);
}

inline void from_f32(const float* src, float* dst, int64_t n) {
  if (src != dst) std::memcpy(dst, src, size_t(n) * 4);
}

// Same rounding as float_to_bf16, written without branches so it vectorises.
inline void from_f32(const float* __restrict src, bf16* dst, int64_t n) {
  uint16_t* __restrict d = reinterpret_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t u = std::bit_cast<uint32_t>(src[i]);
    const uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    d[i] = uint16_t((u & 0x7fffffffu) > 0x7f800000u ? (u >> 16) | 0x40u : r);
  }
}

inline void from_f32(const float* __restrict src, f16* dst, int64_t n) {
  int64_t i = 0;
#if defined(__AVX512F__)
  constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i),
                        _mm512_maskz_cvtps_ph(0xffff, _mm512_loadu_ps(src + i), kRound));
#elif defined(__F16C__)
  constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), _mm256_cvtps_ph(_mm256_loadu_ps(src + i), kRound));
#endif
  for (; i < n; ++i) dst[i] = float_to_f16(src[i]);
}

// The f32 values of p[0..n): p itself for f32 (no copy), else converted into buf.
inline const float* as_f32(const float* p, float*, int64_t) { return p; }
template <typename T>
const float* as_f32(const T* p, float* buf, int64_t n) {
  to_f32(p, buf, n);
  return buf;
}

// Where a kernel writes f32 results destined for p: p itself for f32, else buf (then from_f32).
inline float* out_f32(float* p, float*) { return p; }
template <typename T>
float* out_f32(T*, float* buf) {
  return buf;
}

}  // namespace zt::ops::cpu
