// CPU layer norm over the last dimension, fused: one row at a time in f32 (two passes for mean
// and variance, one for the output), rows in parallel. Backward's gamma/beta sums use a fixed
// row chunking, so they are bitwise the same for any number of threads.
#include <algorithm>
#include <cmath>
#include <vector>

#include "common.h"
#include "kernels.h"
#include "norm_rows.h"

namespace zt::ops::cpu {

using detail::dispatch_float;

namespace {

// Sum of n values in 8 f32 lanes (the compiler vectorises the lanes, not a serial sum).
inline float lane_sum(const float* __restrict v, int64_t n) {
  float lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) lane[k] += v[i + k];
  float s = 0;
  for (; i < n; ++i) s += v[i];
  for (int k = 0; k < 8; ++k) s += lane[k];
  return s;
}

// Sum of (v - m)^2 in 8 f32 lanes.
inline float lane_sq_dev(const float* __restrict v, float m, int64_t n) {
  float lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) lane[k] += (v[i + k] - m) * (v[i + k] - m);
  float s = 0;
  for (; i < n; ++i) s += (v[i] - m) * (v[i] - m);
  for (int k = 0; k < 8; ++k) s += lane[k];
  return s;
}

// One row of the backward (restrict parameters, so the loops vectorise without alias checks):
// o = dx, dg/dbe accumulate dgamma/dbeta; xhat is recomputed (cheaper than a buffer round trip).
void backward_row(const float* __restrict x, const float* __restrict d, const float* __restrict g, float m, float s,
                  int64_t c, float* __restrict o, float* __restrict dg, float* __restrict dbe) {
  float lane_a[8] = {0, 0, 0, 0, 0, 0, 0, 0}, lane_b[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= c; i += 8)
    for (int k = 0; k < 8; ++k) {
      const float w = d[i + k] * g[i + k];
      lane_a[k] += w;
      lane_b[k] += w * ((x[i + k] - m) * s);
    }
  float sa = 0, sb = 0;
  for (; i < c; ++i) {
    sa += d[i] * g[i];
    sb += d[i] * g[i] * ((x[i] - m) * s);
  }
  for (int k = 0; k < 8; ++k) {
    sa += lane_a[k];
    sb += lane_b[k];
  }
  const float ma = sa / float(c), mb = sb / float(c);
  for (int64_t j = 0; j < c; ++j) {
    const float h = (x[j] - m) * s;
    o[j] = s * (d[j] * g[j] - ma - h * mb);
    dg[j] += d[j] * h;
    dbe[j] += d[j];
  }
}

// One row of the forward: y = (x - mean) * rstd * g + b.
void forward_row(const float* __restrict x, const float* __restrict g, const float* __restrict b, float m, float s,
                 int64_t c, float* __restrict y) {
  for (int64_t i = 0; i < c; ++i) y[i] = (x[i] - m) * s * g[i] + b[i];
}

}  // namespace

void layer_norm(const Tensor& x, const Tensor* residual, const Tensor& gamma, const Tensor& beta, float eps, Tensor* sum,
                Tensor& y, Tensor& mean, Tensor& rstd) {
  const int64_t c = x.size(-1);
  const std::vector<float> g = f32_values(gamma, "layer_norm"), b = f32_values(beta, "layer_norm");
  float* pm = mean.data<float>();
  float* pr = rstd.data<float>();
  norm_rows(x, residual, sum, y, "layer_norm", [&](int64_t r, const float* __restrict xr, float* __restrict yr) {
    const float m = lane_sum(xr, c) / float(c);
    const float s = 1.f / std::sqrt(lane_sq_dev(xr, m, c) / float(c) + eps);
    forward_row(xr, g.data(), b.data(), m, s, c, yr);
    pm[r] = m;
    pr[r] = s;
  });
}

// xhat = (x - mean) * rstd, wdy = dy * gamma:
// dx = rstd * (wdy - mean(wdy) - xhat * mean(wdy * xhat)); dgamma = sum_rows dy * xhat; dbeta = sum_rows dy.
void layer_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma, const Tensor& mean, const Tensor& rstd,
                         bool accumulate, Tensor& dx, Tensor& dgamma, Tensor& dbeta) {
  const int64_t c = x.size(-1), rows = x.numel() / c;
  const std::vector<float> g = f32_values(gamma, "layer_norm_backward");
  const float* pm = mean.data<float>();
  const float* pr = rstd.data<float>();
  // Per-chunk partial sums of dgamma (first c) and dbeta (next c); chunks are fixed row ranges.
  const int64_t grain = row_grain(c), chunks = (rows + grain - 1) / grain;
  std::vector<float> part(size_t(chunks) * size_t(2 * c), 0.f);
  norm_chunks(
      dy, x, accumulate, dx, grain, "layer_norm_backward",
      [&](int64_t ch, int64_t r, const float* __restrict xr, const float* __restrict d, float* __restrict o, float*) {
        float* __restrict dg = part.data() + size_t(ch) * size_t(2 * c);
        backward_row(xr, d, g.data(), pm[r], pr[r], c, o, dg, dg + c);
      });
  // Chunks summed in chunk order, columns in parallel.
  std::vector<float> tot(size_t(2 * c), 0.f);
  parallel_for(2 * c, std::max<int64_t>(1, kGrain / chunks), [&](int64_t j0, int64_t j1) {
    for (int64_t ch = 0; ch < chunks; ++ch) {
      const float* __restrict p = part.data() + size_t(ch) * size_t(2 * c);
      float* __restrict t = tot.data();
      for (int64_t j = j0; j < j1; ++j) t[j] += p[j];
    }
  });
  dispatch_float(gamma.dtype(), "layer_norm_backward", [&](auto tag) {
    using T = decltype(tag);
    from_f32(tot.data(), dgamma.data<T>(), c);
    from_f32(tot.data() + c, dbeta.data<T>(), c);
  });
}

}  // namespace zt::ops::cpu
