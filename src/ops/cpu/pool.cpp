// Max pooling over k x k windows with stride s, no padding: our own kernel rather than oneDNN's,
// because the contract keeps each maximum's index in its H*W plane (oneDNN's workspace is
// opaque). One plane per task; values are copied, so 16-bit results are exact.
#include <algorithm>
#include <cstring>
#include <vector>

#include "common.h"
#include "conv_kernels.h"

namespace zt::ops::cpu {

using detail::dispatch_float;
using detail::ld;

namespace {

// Planes per parallel chunk: about kGrain input values.
int64_t plane_grain(int64_t plane) { return std::max<int64_t>(1, kGrain / std::max<int64_t>(1, plane)); }

// As torch: the first maximum in scan order wins, and so does a NaN (it propagates).
inline bool better(float v, float best) { return v > best || v != v; }

// Any k and s: windows scanned row by row.
template <typename T>
void pool_plane(const T* x, int64_t w, int64_t k, int64_t s, int64_t ho, int64_t wo, T* y, int32_t* am) {
  for (int64_t oy = 0; oy < ho; ++oy)
    for (int64_t ox = 0; ox < wo; ++ox) {
      int64_t best = oy * s * w + ox * s;
      float bv = ld(x, best);
      for (int64_t ky = 0; ky < k; ++ky)
        for (int64_t kx = 0; kx < k; ++kx) {
          const int64_t i = (oy * s + ky) * w + ox * s + kx;
          if (const float v = ld(x, i); better(v, bv)) {
            bv = v;
            best = i;
          }
        }
      y[oy * wo + ox] = x[best];
      am[oy * wo + ox] = int32_t(best);
    }
}

// k = s = 2, the CNN's pooling: rows in f32, the four values of each window compared in scan
// order with selects, so the loop vectorises. `buf` holds 2 * w + wo floats.
template <typename T>
void pool2_plane(const T* x, int64_t w, int64_t ho, int64_t wo, T* y, int32_t* am, float* buf) {
  for (int64_t oy = 0; oy < ho; ++oy) {
    const float* r0 = as_f32(x + 2 * oy * w, buf, w);
    const float* r1 = as_f32(x + (2 * oy + 1) * w, buf + w, w);
    float* yo = out_f32(y + oy * wo, buf + 2 * w);
    int32_t* ao = am + oy * wo;
    const int32_t base = int32_t(2 * oy * w), down = int32_t(w);
    for (int64_t ox = 0; ox < wo; ++ox) {
      const float a = r0[2 * ox], b = r0[2 * ox + 1], c = r1[2 * ox], d = r1[2 * ox + 1];
      float m = a;
      int32_t i = 0;
      bool t = better(b, m);
      m = t ? b : m;
      i = t ? 1 : i;
      t = better(c, m);
      m = t ? c : m;
      i = t ? down : i;
      t = better(d, m);
      m = t ? d : m;
      i = t ? down + 1 : i;
      yo[ox] = m;
      ao[ox] = base + int32_t(2 * ox) + i;
    }
    from_f32(yo, y + oy * wo, wo);  // exact: m is one of the inputs
  }
}

}  // namespace

void max_pool2d(const Tensor& x, int64_t k, int64_t s, Tensor& y, Tensor& argmax) {
  const int64_t planes = x.size(0) * x.size(1), h = x.size(2), w = x.size(3);
  const int64_t ho = y.size(2), wo = y.size(3);
  dispatch_float(x.dtype(), "max_pool2d", [&](auto tag) {
    using T = decltype(tag);
    const T* xs = static_cast<const T*>(x.raw_data());
    T* ys = static_cast<T*>(y.raw_data());
    int32_t* am = argmax.data<int32_t>();
    parallel_for(planes, plane_grain(h * w), [&](int64_t p0, int64_t p1) {
      std::vector<float> buf(k == 2 && s == 2 ? static_cast<size_t>(2 * w + wo) : 0);
      for (int64_t p = p0; p < p1; ++p) {
        if (k == 2 && s == 2)
          pool2_plane(xs + p * h * w, w, ho, wo, ys + p * ho * wo, am + p * ho * wo, buf.data());
        else
          pool_plane(xs + p * h * w, w, k, s, ho, wo, ys + p * ho * wo, am + p * ho * wo);
      }
    });
  });
}

void max_pool2d_backward(const Tensor& dy, const Tensor& argmax, Tensor& dx) {
  const int64_t planes = dx.size(0) * dx.size(1), hw = dx.size(2) * dx.size(3);
  const int64_t out = dy.size(2) * dy.size(3);
  dispatch_float(dy.dtype(), "max_pool2d_backward", [&](auto tag) {
    using T = decltype(tag);
    const T* g = static_cast<const T*>(dy.raw_data());
    T* d = static_cast<T*>(dx.raw_data());
    const int32_t* am = argmax.data<int32_t>();
    parallel_for(planes, plane_grain(hw), [&](int64_t p0, int64_t p1) {
      if constexpr (std::is_same_v<T, float>) {  // sums straight into dx
        std::memset(d + p0 * hw, 0, size_t((p1 - p0) * hw) * sizeof(float));
        for (int64_t p = p0; p < p1; ++p)
          for (int64_t o = 0; o < out; ++o) d[p * hw + am[p * out + o]] += g[p * out + o];
      } else {  // f32 sums, rounded once: overlapping windows may add several values
        std::vector<float> acc(static_cast<size_t>(hw));
        for (int64_t p = p0; p < p1; ++p) {
          std::fill(acc.begin(), acc.end(), 0.f);
          for (int64_t o = 0; o < out; ++o) acc[size_t(am[p * out + o])] += ld(g, p * out + o);
          from_f32(acc.data(), d + p * hw, hw);
        }
      }
    });
  });
}

}  // namespace zt::ops::cpu
