// CPU kernels of the Llama family's ops: RMSNorm, rotary position embeddings on a packed q/k/v,
// and the SwiGLU product. One row at a time in f32, rows in parallel; RMSNorm's gain gradient
// sums fixed row chunks in chunk order, so every result is the same for any number of threads.
#include <algorithm>
#include <cmath>
#include <vector>

#include "common.h"
#include "kernels.h"
#include "norm_rows.h"

namespace zt::ops::cpu {

using detail::dispatch_float;
using detail::exp_approx;

namespace {

// Sum of v*w in 8 f32 lanes, so the loop vectorises without fast-math.
inline float lane_dot(const float* __restrict v, const float* __restrict w, int64_t n) {
  float lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) lane[k] += v[i + k] * w[i + k];
  float s = 0;
  for (; i < n; ++i) s += v[i] * w[i];
  for (int k = 0; k < 8; ++k) s += lane[k];
  return s;
}


inline float sigmoid(float g) { return 1.f / (1.f + exp_approx(-g)); }

}  // namespace

// y = x * rstd * gamma, rstd = 1 / sqrt(mean(x^2) + eps) (Hugging Face's LlamaRMSNorm, in f32).
void rms_norm(const Tensor& x, const Tensor* residual, const Tensor& gamma, float eps, Tensor* sum, Tensor& y,
              Tensor& rstd) {
  const int64_t c = x.size(-1);
  const std::vector<float> g = f32_values(gamma, "rms_norm");
  float* pr = rstd.data<float>();
  norm_rows(x, residual, sum, y, "rms_norm", [&](int64_t r, const float* __restrict xr, float* __restrict yr) {
    const float* __restrict gg = g.data();
    const float s = 1.f / std::sqrt(lane_dot(xr, xr, c) / float(c) + eps);
    for (int64_t i = 0; i < c; ++i) yr[i] = xr[i] * s * gg[i];
    pr[r] = s;
  });
}

// w = dy * gamma: dx = rstd * w - x * rstd^3 * mean(w * x); dgamma = sum_rows dy * x * rstd.
void rms_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma, const Tensor& rstd, bool accumulate,
                       Tensor& dx, Tensor& dgamma) {
  const int64_t c = x.size(-1), rows = x.numel() / c;
  const std::vector<float> g = f32_values(gamma, "rms_norm_backward");
  const float* pr = rstd.data<float>();
  const int64_t grain = row_grain(c), chunks = (rows + grain - 1) / grain;
  std::vector<float> part(size_t(chunks) * size_t(c), 0.f);
  norm_chunks(dy, x, accumulate, dx, grain, "rms_norm_backward",
              [&](int64_t ch, int64_t r, const float* __restrict xr, const float* __restrict d, float* __restrict o,
                  float* __restrict w) {
                const float* __restrict gg = g.data();
                float* __restrict dg = part.data() + size_t(ch) * size_t(c);
                const float s = pr[r];
                for (int64_t i = 0; i < c; ++i) w[i] = d[i] * gg[i];
                const float k = lane_dot(w, xr, c) / float(c) * s * s * s;
                for (int64_t i = 0; i < c; ++i) {
                  o[i] = s * w[i] - xr[i] * k;
                  dg[i] += d[i] * (xr[i] * s);
                }
              });
  std::vector<float> tot(size_t(c), 0.f);
  for (int64_t ch = 0; ch < chunks; ++ch)
    for (int64_t j = 0; j < c; ++j) tot[size_t(j)] += part[size_t(ch) * size_t(c) + size_t(j)];
  dispatch_float(dgamma.dtype(), "rms_norm_backward",
                 [&](auto tag) { from_f32(tot.data(), dgamma.data<decltype(tag)>(), c); });
}

// Note [rotary halves]: Hugging Face's rotate_half pairs feature i with i + D/2 of each head:
// out_i = x_i cos - x_{i+D/2} sin, out_{i+D/2} = x_{i+D/2} cos + x_i sin, angle t * theta^(-2i/D).
// The inverse (backward) rotates by -angle. The q and k heads of each row rotate; v is copied.
void rope(const Tensor& qkv, int64_t n_head, int64_t n_kv_head, const Tensor& cos, const Tensor& sin, bool inverse,
          Tensor& out) {
  const int64_t B = qkv.size(0), T = qkv.size(1), W = qkv.size(2), D = W / (n_head + 2 * n_kv_head), half = D / 2;
  const int64_t rotated = (n_head + n_kv_head) * D;
  const float* pc = cos.data<float>();
  const float* ps = sin.data<float>();
  const float sign = inverse ? -1.f : 1.f;
  dispatch_float(qkv.dtype(), "rope", [&](auto tag) {
    using T_ = decltype(tag);
    const T_* px = qkv.data<T_>();
    T_* po = out.data<T_>();
    parallel_for(B * T, row_grain(W), [&](int64_t r0, int64_t r1) {
      std::vector<float> xb(static_cast<size_t>(W)), ob(static_cast<size_t>(W));
      for (int64_t r = r0; r < r1; ++r) {
        const float* __restrict x = as_f32(px + r * W, xb.data(), W);
        float* __restrict o = ob.data();
        const float* __restrict c = pc + (r % T) * half;
        const float* __restrict s = ps + (r % T) * half;
        for (int64_t h = 0; h < rotated; h += D)
          for (int64_t i = 0; i < half; ++i) {
            const float a = x[h + i], b = x[h + half + i], si = sign * s[i];
            o[h + i] = a * c[i] - b * si;
            o[h + half + i] = b * c[i] + a * si;
          }
        std::copy(x + rotated, x + W, o + rotated);
        from_f32(o, po + r * W, W);
      }
    });
  });
}

// out = silu(gate) * up with gate = gate_up[..., :I], up = gate_up[..., I:] (Phi-3's gate_up_proj).
void swiglu(const Tensor& gate_up, Tensor& out) {
  const int64_t n = out.size(-1), rows = out.numel() / n;
  dispatch_float(gate_up.dtype(), "swiglu", [&](auto tag) {
    using T = decltype(tag);
    const T* px = gate_up.data<T>();
    T* po = out.data<T>();
    parallel_for(rows, row_grain(2 * n), [&](int64_t r0, int64_t r1) {
      std::vector<float> xb(static_cast<size_t>(2 * n)), ob(static_cast<size_t>(n));
      for (int64_t r = r0; r < r1; ++r) {
        const float* __restrict x = as_f32(px + r * 2 * n, xb.data(), 2 * n);
        float* __restrict o = out_f32(po + r * n, ob.data());
        for (int64_t i = 0; i < n; ++i) o[i] = x[i] * sigmoid(x[i]) * x[n + i];
        from_f32(o, po + r * n, n);
      }
    });
  });
}

// d gate = dy * up * sig * (1 + gate * (1 - sig)), d up = dy * silu(gate).
void swiglu_backward(const Tensor& dy, const Tensor& gate_up, Tensor& dgate_up) {
  const int64_t n = dy.size(-1), rows = dy.numel() / n;
  dispatch_float(gate_up.dtype(), "swiglu_backward", [&](auto tag) {
    using T = decltype(tag);
    const T* px = gate_up.data<T>();
    const T* pd = dy.data<T>();
    T* po = dgate_up.data<T>();
    parallel_for(rows, row_grain(2 * n), [&](int64_t r0, int64_t r1) {
      std::vector<float> xb(static_cast<size_t>(2 * n)), db(static_cast<size_t>(n)), ob(static_cast<size_t>(2 * n));
      for (int64_t r = r0; r < r1; ++r) {
        const float* __restrict x = as_f32(px + r * 2 * n, xb.data(), 2 * n);
        const float* __restrict d = as_f32(pd + r * n, db.data(), n);
        float* __restrict o = out_f32(po + r * 2 * n, ob.data());
        for (int64_t i = 0; i < n; ++i) {
          const float g = x[i], u = x[n + i], sg = sigmoid(g);
          o[i] = d[i] * u * (sg * (1.f + g * (1.f - sg)));
          o[n + i] = d[i] * (g * sg);
        }
        from_f32(o, po + r * 2 * n, 2 * n);
      }
    });
  });
}

}  // namespace zt::ops::cpu
