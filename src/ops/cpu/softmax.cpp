// CPU softmax-family kernels over the last dimension, in f32 whatever the storage dtype
// (max-subtracted, so large logits are safe). Rows run in parallel, a few passes each.
#include <algorithm>
#include <cmath>
#include <vector>

#include "common.h"
#include "kernels.h"

namespace zt::ops::cpu {

using detail::dispatch_float;
using detail::exp_approx;

namespace {

// Per-thread f32 scratch for a few rows of c values.
struct Rows {
  explicit Rows(int64_t c, int n) : buf(size_t(c) * size_t(n)), c_(c) {}
  float* operator[](int i) { return buf.data() + size_t(i) * size_t(c_); }
  std::vector<float> buf;
  int64_t c_;
};

// log_softmax (log=true) or softmax of each row of x into out (any float dtypes).
template <typename T, typename U>
void softmax_rows(const T* px, U* po, int64_t rows, int64_t c, bool log) {
  parallel_for(rows, std::max<int64_t>(1, kGrain / std::max<int64_t>(1, c)), [&](int64_t r0, int64_t r1) {
    Rows buf(c, 3);
    for (int64_t r = r0; r < r1; ++r) {
      const float* __restrict x = as_f32(px + r * c, buf[0], c);
      float* __restrict e = buf[1];
      float* __restrict y = out_f32(po + r * c, buf[2]);
      float m = -INFINITY;
      for (int64_t i = 0; i < c; ++i) m = std::max(m, x[i]);
      float s = 0.f;
      for (int64_t i = 0; i < c; ++i) {
        e[i] = exp_approx(x[i] - m);
        s += e[i];
      }
      if (log) {
        const float lse = m + std::log(s);
        for (int64_t i = 0; i < c; ++i) y[i] = x[i] - lse;
      } else {
        const float inv = 1.f / s;
        for (int64_t i = 0; i < c; ++i) y[i] = e[i] * inv;
      }
      from_f32(y, po + r * c, c);
    }
  });
}

}  // namespace

void softmax(const Tensor& x, bool log, Tensor& out) {
  const int64_t c = x.size(-1), rows = x.numel() / c;
  dispatch_float(x.dtype(), "softmax", [&](auto xt) {
    using T = decltype(xt);
    dispatch_float(out.dtype(), "softmax", [&](auto ot) {
      using U = decltype(ot);
      softmax_rows(x.data<T>(), out.data<U>(), rows, c, log);
    });
  });
}

// softmax: dx = y * (dy - sum(dy*y)); log_softmax: dx = dy - exp(y) * sum(dy).
void softmax_backward(const Tensor& dy, const Tensor& y, bool log, Tensor& out) {
  const int64_t c = y.size(-1), rows = y.numel() / c;
  dispatch_float(y.dtype(), "softmax_backward", [&](auto tag) {
    using T = decltype(tag);
    const T* pd = dy.data<T>();
    const T* py = y.data<T>();
    T* po = out.data<T>();
    parallel_for(rows, std::max<int64_t>(1, kGrain / c), [&](int64_t r0, int64_t r1) {
      Rows buf(c, 3);
      for (int64_t r = r0; r < r1; ++r) {
        const float* __restrict d = as_f32(pd + r * c, buf[0], c);
        const float* __restrict yy = as_f32(py + r * c, buf[1], c);
        float* __restrict o = out_f32(po + r * c, buf[2]);
        float s = 0.f;
        if (log) {
          for (int64_t i = 0; i < c; ++i) s += d[i];
          for (int64_t i = 0; i < c; ++i) o[i] = d[i] - exp_approx(yy[i]) * s;
        } else {
          for (int64_t i = 0; i < c; ++i) s += d[i] * yy[i];
          for (int64_t i = 0; i < c; ++i) o[i] = yy[i] * (d[i] - s);
        }
        from_f32(o, po + r * c, c);
      }
    });
  });
}

void cross_entropy_backward(const Tensor& log_probs, const Tensor& targets, int64_t ignore_index, float k,
                            Tensor& out) {
  const int64_t n = log_probs.size(0), c = log_probs.size(1);
  const float* lp = log_probs.data<float>();
  const int32_t* pt = targets.data<int32_t>();
  dispatch_float(out.dtype(), "cross_entropy_backward", [&](auto tag) {
    using T = decltype(tag);
    T* po = out.data<T>();
    parallel_for(n, std::max<int64_t>(1, kGrain / std::max<int64_t>(1, c)), [&](int64_t r0, int64_t r1) {
      Rows buf(c, 1);
      for (int64_t r = r0; r < r1; ++r) {
        float* __restrict o = out_f32(po + r * c, buf[0]);
        const float* __restrict l = lp + r * c;
        if (pt[r] == ignore_index || k == 0.f) {
          std::fill(o, o + c, 0.f);
        } else {
          for (int64_t i = 0; i < c; ++i) o[i] = k * exp_approx(l[i]);
          o[pt[r]] -= k;
        }
        from_f32(o, po + r * c, c);
      }
    });
  });
}

}  // namespace zt::ops::cpu
