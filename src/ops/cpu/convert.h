#pragma once
// Vectorised block conversion between f32 and the 16-bit float types, with the same results
// as core's scalar conversions (round to nearest even, NaN stays NaN, overflow to inf).
// Kernels compute in f32 on blocks of kBlock values and round once on the way out.
#include <immintrin.h>

#include <bit>
#include <cstdint>
#include <cstring>

#include "zt/core/dtype.h"

namespace zt::ops::cpu {

// Values per conversion block: the block buffers live on the stack and stay in L1.
constexpr int64_t kBlock = 512;

// Note [streamed stores]: a large destination written and not read soon (the optimizer's 16-bit
// parameters, a whole buffer's cast) leaves through streaming stores, so a plain store's read of
// each line first (a 16-bit parameter: 2 of the 30 bytes it moves) is not paid. The values are
// made into an L1 buffer; a block of kBlock at a 64-byte aligned dst streams, anything else is
// copied. The caller fences (_mm_sfence) before another thread may read dst.
#if defined(__AVX512F__) || defined(__AVX2__)
constexpr bool kStreams = true;
#else
constexpr bool kStreams = false;
#endif
template <typename T>
inline void stream_block(T* __restrict dst, const T* __restrict src, int64_t n) {
  static_assert(kBlock * sizeof(T) % 64 == 0);
  if (reinterpret_cast<uintptr_t>(dst) % 64 == 0 && n == kBlock) {
    for (int64_t i = 0; i < n; i += 64 / int64_t(sizeof(T))) {
#if defined(__AVX512F__)
      _mm512_stream_si512(reinterpret_cast<__m512i*>(dst + i), _mm512_load_si512(src + i));
#elif defined(__AVX2__)
      auto* d = reinterpret_cast<__m256i*>(dst + i);
      const auto* v = reinterpret_cast<const __m256i*>(src + i);
      _mm256_stream_si256(d, _mm256_load_si256(v));
      _mm256_stream_si256(d + 1, _mm256_load_si256(v + 1));
#else
      std::memcpy(dst + i, src + i, 64);
#endif
    }
    return;
  }
  std::memcpy(dst, src, size_t(n) * sizeof(T));
}

inline void to_f32(const float* src, float* dst, int64_t n) { std::memcpy(dst, src, size_t(n) * 4); }

inline void to_f32(const bf16* src, float* __restrict dst, int64_t n) {
  const uint16_t* __restrict s = reinterpret_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = std::bit_cast<float>(uint32_t(s[i]) << 16);
}

// f16 <-> f32 run the vector path of the capped processor (Note [processor cap], isa.cpp).
void to_f32(const f16* src, float* dst, int64_t n);
void from_f32(const float* src, f16* dst, int64_t n);

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

// v[0..n) rounded to the values of dtype dt (what a cast to dt and back gives).
inline void round_to(DType dt, float* v, int64_t n) {
  if (dt == DType::bf16)
    for (int64_t i = 0; i < n; ++i) v[i] = bf16_to_float(float_to_bf16(v[i]));
  else if (dt == DType::f16)
    for (int64_t i = 0; i < n; ++i) v[i] = f16_to_float(float_to_f16(v[i]));
}

}  // namespace zt::ops::cpu
