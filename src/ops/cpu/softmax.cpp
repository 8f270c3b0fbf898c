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

// Reductions over a row in kLanes independent partial results combined in a fixed order: the
// compiler vectorises them (a single running sum would be a serial chain), and the result does
// not depend on the thread count.
constexpr int64_t kLanes = 16;

float row_max(const float* __restrict x, int64_t c) {
  float acc[kLanes];
  std::fill(acc, acc + kLanes, -INFINITY);
  int64_t i = 0;
  for (; i + kLanes <= c; i += kLanes)
    for (int64_t j = 0; j < kLanes; ++j) acc[j] = acc[j] > x[i + j] ? acc[j] : x[i + j];
  for (; i < c; ++i) acc[0] = std::max(acc[0], x[i]);
  return *std::max_element(acc, acc + kLanes);
}

float row_sum(const float* __restrict x, int64_t c) {
  float acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= c; i += kLanes)
    for (int64_t j = 0; j < kLanes; ++j) acc[j] += x[i + j];
  for (; i < c; ++i) acc[0] += x[i];
  float s = 0.f;
  for (float a : acc) s += a;
  return s;
}

// o[i] = k * exp(x[i] - shift). A function of its own: GCC vectorises a loop whose restrict
// pointers are parameters, not locals (f32 rows, read and written in the tensors, ran scalar).
void scaled_exp_row(const float* __restrict x, float* __restrict o, int64_t c, float shift, float k) {
  for (int64_t i = 0; i < c; ++i) o[i] = k * exp_approx(x[i] - shift);
}

float row_sum_exp(const float* __restrict x, int64_t c, float m) {
  float acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= c; i += kLanes)
    for (int64_t j = 0; j < kLanes; ++j) acc[j] += exp_approx(x[i + j] - m);
  for (; i < c; ++i) acc[0] += exp_approx(x[i] - m);
  float s = 0.f;
  for (float a : acc) s += a;
  return s;
}

// log_softmax (log=true) or softmax of each row of x into out (any float dtypes).
template <typename T, typename U>
void softmax_rows(const T* px, U* po, int64_t rows, int64_t c, bool log) {
  parallel_for(rows, std::max<int64_t>(1, kGrain / std::max<int64_t>(1, c)), [&](int64_t r0, int64_t r1) {
    Rows buf(c, 3);
    for (int64_t r = r0; r < r1; ++r) {
      const float* __restrict x = as_f32(px + r * c, buf[0], c);
      float* __restrict e = buf[1];
      float* __restrict y = out_f32(po + r * c, buf[2]);
      const float m = row_max(x, c);
      for (int64_t i = 0; i < c; ++i) e[i] = exp_approx(x[i] - m);
      const float s = row_sum(e, c);
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

// Note [fused cross-entropy]: the forward keeps one f32 per row (log-sum-exp) instead of an
// [N, C] f32 log-softmax, so a 50k vocabulary costs one pass over the logits each way, or one in
// all where the forward writes the gradient too (Note [one-pass classifier] in src/ops/softmax.cpp).

namespace {
// Block [j, j + len) of a row's gradient k * (exp(x - lse) - onehot(t)), t counted from j: the
// backward's and the one-pass forward's alike.
void ce_grad_block(const float* x, float* o, int64_t len, float lse, float k, int64_t t) {
  scaled_exp_row(x, o, len, lse, k);
  if (t >= 0 && t < len) o[t] -= k;
}
}  // namespace

void cross_entropy_rows(const Tensor& logits, const Tensor& targets, int64_t ignore_index, float k, Tensor& lse,
                        Tensor& nll, Tensor* grad) {
  const int64_t n = logits.size(0), c = logits.size(1);
  const int32_t* pt = targets.data<int32_t>();
  float* pl = lse.data<float>();
  float* pn = nll.data<float>();
  dispatch_float(logits.dtype(), "cross_entropy", [&](auto tag) {
    using T = decltype(tag);
    const T* px = logits.data<T>();
    T* pg = grad ? grad->data<T>() : nullptr;  // the logits' dtype
    parallel_for(n, std::max<int64_t>(1, kGrain / std::max<int64_t>(1, c)), [&](int64_t r0, int64_t r1) {
      Rows buf(c, 1);
      alignas(64) float bo[kBlock];
      for (int64_t r = r0; r < r1; ++r) {
        const float* __restrict x = as_f32(px + r * c, buf[0], c);
        const float m = row_max(x, c);
        pl[r] = m + std::log(row_sum_exp(x, c, m));
        pn[r] = pt[r] == ignore_index ? 0.f : -(x[pt[r]] - pl[r]);
        if (!pg) continue;
        const bool none = pt[r] == ignore_index || k == 0.f;
        for (int64_t j = 0; j < c; j += kBlock) {  // the row is still in cache
          const int64_t len = std::min(kBlock, c - j);
          float* __restrict o = out_f32(pg + r * c + j, bo);
          if (none)
            std::fill(o, o + len, 0.f);
          else
            ce_grad_block(x + j, o, len, pl[r], k, pt[r] - j);
          from_f32(o, pg + r * c + j, len);
        }
      }
    });
  });
}

void cross_entropy_backward(const Tensor& logits, const Tensor& lse, const Tensor& targets, int64_t ignore_index,
                            float k, Tensor& out) {
  const int64_t n = logits.size(0), c = logits.size(1);
  const float* pl = lse.data<float>();
  const int32_t* pt = targets.data<int32_t>();
  dispatch_float(logits.dtype(), "cross_entropy_backward", [&](auto tag) {
    using T = decltype(tag);
    const T* px = logits.data<T>();
    T* po = out.data<T>();  // out has the logits' dtype
    // Blocks of kBlock values through L1 (16-bit logits): a whole f32 row of a 50k vocabulary
    // (200 KB, twice) went through L2 and made the bf16 backward 1.6x slower than f32's.
    parallel_for(n, std::max<int64_t>(1, kGrain / std::max<int64_t>(1, c)), [&](int64_t r0, int64_t r1) {
      alignas(64) float bx[kBlock], bo[kBlock];
      for (int64_t r = r0; r < r1; ++r) {
        const bool none = pt[r] == ignore_index || k == 0.f;
        for (int64_t j = 0; j < c; j += kBlock) {
          const int64_t len = std::min(kBlock, c - j), at = r * c + j;
          float* __restrict o = out_f32(po + at, bo);
          if (none)
            std::fill(o, o + len, 0.f);
          else
            ce_grad_block(as_f32(px + at, bx, len), o, len, pl[r], k, pt[r] - j);
          from_f32(o, po + at, len);
        }
      }
    });
  });
}

}  // namespace zt::ops::cpu
