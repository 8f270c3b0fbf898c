#pragma once
// exp and tanh as plain arithmetic, written once for both backends: on the CPU loops over them
// vectorise, nvcc compiles the same operations as device code, so the two agree to rounding.
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

}  // namespace zt::ops::approx
