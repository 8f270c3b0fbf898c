#pragma once
// Helpers shared by the CPU kernels (private to zt_ops): dtype dispatch, scalar f32/bf16/f16
// loads and stores (the block conversions in convert.h are the fast path), a vectorisable exp.
#include <cmath>
#include <cstdint>
#include <cstring>

#include "../contract.h"
#include "convert.h"
#include "zt/core/parallel.h"
#include "zt/core/tensor.h"
#include "zt/ops/ops.h"

namespace zt::ops::detail {

inline float ld(const float* p, int64_t i) { return p[i]; }
inline float ld(const bf16* p, int64_t i) { return bf16_to_float(p[i]); }
inline void st(float* p, int64_t i, float v) { p[i] = v; }
inline void st(bf16* p, int64_t i, float v) { p[i] = float_to_bf16(v); }
inline float ld(const f16* p, int64_t i) { return f16_to_float(p[i]); }
inline void st(f16* p, int64_t i, float v) { p[i] = float_to_f16(v); }

// Calls fn(T{}) with T = float, bf16 or f16 for the dtype.
template <typename Fn>
decltype(auto) dispatch_float(DType dt, const char* op, Fn&& fn) {
  switch (dt) {
    case DType::f32:
      return fn(float{});
    case DType::bf16:
      return fn(bf16{});
    case DType::f16:
      return fn(f16{});
    default:
      break;
  }
  ZT_THROW("[", op, "] dtype ", dtype_name(dt), " is not supported (allowed: f32, bf16, f16)");
}

// exp with ~2 ulp error written as plain arithmetic so loops over it vectorise (Cephes).
inline float exp_approx(float x) {
  const float xc = x > 88.3762626647949f ? 88.3762626647949f : (x < -87.3f ? -87.3f : x);
  const float n = (xc * 1.44269504088896341f + 12582912.f) - 12582912.f;  // round to nearest
  const float r = xc - n * 0.693359375f + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.f;
  int32_t bits = (int32_t(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, 4);
  return x < -87.3f ? 0.f : p * scale;
}

// tanh via exp of a non-positive argument, so it never overflows.
inline float tanh_approx(float u) {
  const float a = u < 0 ? -u : u;
  const float e = exp_approx(-2.f * a);
  const float t = (1.f - e) / (1.f + e);
  return u < 0 ? -t : t;
}

}  // namespace zt::ops::detail
