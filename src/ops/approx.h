#pragma once
// exp, tanh, erfc and GELU's two forms as plain arithmetic, written once for both backends: on the
// CPU loops over them vectorise, nvcc compiles the same operations as device code, so the two agree.
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define ZT_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define ZT_HOST_DEVICE inline
#endif

namespace zt::ops::approx {

// exp with ~2 ulp error (Cephes): round to nearest by adding 1.5 * 2^23, a polynomial, a power of two.
ZT_HOST_DEVICE float exp_approx(float x) {
  const float xc = x > 88.3762626647949f ? 88.3762626647949f : (x < -87.3f ? -87.3f : x);
  const float n = (xc * 1.44269504088896341f + 12582912.f) - 12582912.f;
  const float r = xc - n * 0.693359375f + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.f;
  const int32_t bits = (int32_t(n) + 127) << 23;
  float scale;
  memcpy(&scale, &bits, 4);
  return x < -87.3f ? 0.f : p * scale;
}

// tanh via exp of a non-positive argument, so it never overflows.
ZT_HOST_DEVICE float tanh_approx(float u) {
  const float a = u < 0 ? -u : u;
  const float e = exp_approx(-2.f * a);
  const float t = (1.f - e) / (1.f + e);
  return u < 0 ? -t : t;
}

// erfc(z) for z >= 0 (Numerical Recipes' erfcc, Chebyshev-fitted): relative error under 1.2e-7.
ZT_HOST_DEVICE float erfc_nonneg(float z) {
  const float t = 1.f / (1.f + 0.5f * z);
  float p = 0.17087277f;
  p = p * t - 0.82215223f;
  p = p * t + 1.48851587f;
  p = p * t - 1.13520398f;
  p = p * t + 0.27886807f;
  p = p * t - 0.18628806f;
  p = p * t + 0.09678418f;
  p = p * t + 0.37409196f;
  p = p * t + 1.00002368f;
  return t * exp_approx(-z * z - 1.26551223f + t * p);
}

// GELU, tanh form (torch's gelu(approximate='tanh'), GPT-2's gelu_new) and its derivative.
inline constexpr float kGeluC = 0.7978845608028654f;  // sqrt(2/pi)
inline constexpr float kGeluA = 0.044715f;
ZT_HOST_DEVICE float gelu_tanh(float v) {
  const float t = tanh_approx(kGeluC * (v + kGeluA * v * v * v));
  return 0.5f * v * (1.f + t);
}
ZT_HOST_DEVICE float gelu_tanh_grad(float v) {
  const float t = tanh_approx(kGeluC * (v + kGeluA * v * v * v));
  const float du = kGeluC * (1.f + 3.f * kGeluA * v * v);
  return 0.5f * (1.f + t) + 0.5f * v * (1.f - t * t) * du;
}

// GELU, erf form (torch's gelu(), BERT's "gelu"): v * Phi(v), Phi(v) = erfc(-v / sqrt 2) / 2, from
// erfc of |v| so the tail of either sign keeps its relative precision.
ZT_HOST_DEVICE float normal_cdf(float v) {
  const float e = erfc_nonneg((v < 0 ? -v : v) * 0.70710678118654752f);
  return 0.5f * (v < 0 ? e : 2.f - e);
}
ZT_HOST_DEVICE float gelu_erf(float v) { return v * normal_cdf(v); }
// Phi(v) + v * phi(v), phi the standard normal density.
ZT_HOST_DEVICE float gelu_erf_grad(float v) {
  return normal_cdf(v) + v * 0.3989422804014327f * exp_approx(-0.5f * v * v);
}

}  // namespace zt::ops::approx
