// Softmax family over the last dimension (max-subtracted, so large logits are safe) and the
// fused cross-entropy loss. Rows run in parallel; each row is a few vectorisable passes.
#include <algorithm>
#include <cmath>
#include <vector>

#include "common.h"
#include "zt/ops/ops.h"

namespace zt::ops {

using detail::check_float;
using detail::dispatch_float;
using detail::exp_approx;
using detail::ld;
using detail::st;

namespace {

int64_t last_dim(const Tensor& x, const char* op) {
  ZT_CHECK(x.dim() >= 1, "[", op, "] needs at least one dimension, got a 0-d tensor");
  return x.size(-1);
}

template <typename T>
float row_max(const T* __restrict p, int64_t n) {
  float m = -INFINITY;
  for (int64_t i = 0; i < n; ++i) m = std::max(m, ld(p, i));
  return m;
}

// Computes log_softmax (log=true) or softmax of each row of x into out (f32 or bf16).
template <typename T, typename U>
void softmax_rows(const T* px, U* po, int64_t rows, int64_t c, bool log) {
  parallel_for(rows, std::max<int64_t>(1, kGrain / std::max<int64_t>(1, c)), [&](int64_t r0, int64_t r1) {
    std::vector<float> buf(static_cast<size_t>(c));
    for (int64_t r = r0; r < r1; ++r) {
      const T* __restrict x = px + r * c;
      U* __restrict y = po + r * c;
      float* __restrict e = buf.data();
      const float m = row_max(x, c);
      float s = 0.f;
      for (int64_t i = 0; i < c; ++i) {
        e[i] = exp_approx(ld(x, i) - m);
        s += e[i];
      }
      if (log) {
        const float lse = m + std::log(s);
        for (int64_t i = 0; i < c; ++i) st(y, i, ld(x, i) - lse);
      } else {
        const float inv = 1.f / s;
        for (int64_t i = 0; i < c; ++i) st(y, i, e[i] * inv);
      }
    }
  });
}

Tensor softmax_impl(const Tensor& x_in, bool log, const char* op) {
  check_float(x_in, op);
  const int64_t c = last_dim(x_in, op);
  Tensor x = x_in.contiguous();
  Tensor out = Tensor::empty(x.shape(), x.dtype());
  if (x.numel() == 0) return out;
  dispatch_float(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    softmax_rows(x.data<T>(), out.data<T>(), x.numel() / c, c, log);
  });
  return out;
}

// softmax: dx = y * (dy - sum(dy*y)); log_softmax: dx = dy - exp(y) * sum(dy).
Tensor softmax_backward_impl(const Tensor& dy_in, const Tensor& y_in, bool log, const char* op) {
  check_float(dy_in, op);
  check_float(y_in, op);
  detail::check_same_dtype(dy_in, y_in, op);
  ZT_CHECK(dy_in.shape() == y_in.shape(), "[", op, "] dy ", shape_str(dy_in.shape()), " and y ",
           shape_str(y_in.shape()), " differ");
  const int64_t c = last_dim(y_in, op);
  Tensor dy = dy_in.contiguous(), y = y_in.contiguous();
  Tensor out = Tensor::empty(y.shape(), y.dtype());
  if (y.numel() == 0) return out;
  dispatch_float(y.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    const T* pd = dy.data<T>();
    const T* py = y.data<T>();
    T* po = out.data<T>();
    parallel_for(y.numel() / c, std::max<int64_t>(1, kGrain / c), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const T* __restrict d = pd + r * c;
        const T* __restrict yy = py + r * c;
        T* __restrict o = po + r * c;
        float s = 0.f;
        if (log) {
          for (int64_t i = 0; i < c; ++i) s += ld(d, i);
          for (int64_t i = 0; i < c; ++i) st(o, i, ld(d, i) - exp_approx(ld(yy, i)) * s);
        } else {
          for (int64_t i = 0; i < c; ++i) s += ld(d, i) * ld(yy, i);
          for (int64_t i = 0; i < c; ++i) st(o, i, ld(yy, i) * (ld(d, i) - s));
        }
      }
    });
  });
  return out;
}

void check_targets(const Tensor& logits, const Tensor& targets, const char* op) {
  check_float(logits, op);
  ZT_CHECK(logits.dim() == 2, "[", op, "] logits must be [N, C], got ", shape_str(logits.shape()));
  ZT_CHECK(targets.dtype() == DType::i32, "[", op, "] targets must be i32, got ", dtype_name(targets.dtype()));
  ZT_CHECK(targets.dim() == 1 && targets.size(0) == logits.size(0), "[", op, "] targets ",
           shape_str(targets.shape()), " do not match logits ", shape_str(logits.shape()));
}

}  // namespace

Tensor softmax(const Tensor& x) { return softmax_impl(x, false, "softmax"); }
Tensor log_softmax(const Tensor& x) { return softmax_impl(x, true, "log_softmax"); }
Tensor softmax_backward(const Tensor& dy, const Tensor& y) {
  return softmax_backward_impl(dy, y, false, "softmax_backward");
}
Tensor log_softmax_backward(const Tensor& dy, const Tensor& y) {
  return softmax_backward_impl(dy, y, true, "log_softmax_backward");
}

// Note: when every target is ignored the loss is 0 (torch gives NaN) and the gradient is zero,
// so a micro-batch of padding cannot poison training.
CrossEntropyResult cross_entropy(const Tensor& logits_in, const Tensor& targets_in, int64_t ignore_index) {
  check_targets(logits_in, targets_in, "cross_entropy");
  Tensor logits = logits_in.contiguous(), targets = targets_in.contiguous();
  const int64_t n = logits.size(0), c = logits.size(1);
  CrossEntropyResult res;
  res.log_probs = Tensor::empty({n, c}, DType::f32);
  float* lp = res.log_probs.data<float>();
  if (n * c > 0) {
    dispatch_float(logits.dtype(), "cross_entropy", [&](auto tag) {
      using T = decltype(tag);
      softmax_rows(logits.data<T>(), lp, n, c, true);
    });
  }
  const int32_t* pt = targets.data<int32_t>();
  double total = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (pt[i] == ignore_index) continue;
    ZT_CHECK(pt[i] >= 0 && pt[i] < c, "[cross_entropy] target ", pt[i], " at row ", i, " is outside [0, ", c,
             ") and is not ignore_index ", ignore_index);
    total -= lp[i * c + pt[i]];
    ++res.count;
  }
  res.loss = Tensor::full({}, res.count ? float(total / double(res.count)) : 0.f, DType::f32);
  return res;
}

Tensor cross_entropy_backward(float dloss, const CrossEntropyResult& saved, const Tensor& targets_in,
                              int64_t ignore_index, DType logits_dtype) {
  check_targets(saved.log_probs, targets_in, "cross_entropy_backward");
  Tensor targets = targets_in.contiguous();
  const int64_t n = saved.log_probs.size(0), c = saved.log_probs.size(1);
  Tensor out = Tensor::empty({n, c}, logits_dtype);
  const float* lp = saved.log_probs.data<float>();
  const int32_t* pt = targets.data<int32_t>();
  const float k = saved.count ? dloss / float(saved.count) : 0.f;
  for (int64_t r = 0; r < n; ++r)  // validate before the parallel loop (no throwing inside it)
    ZT_CHECK(pt[r] == ignore_index || (pt[r] >= 0 && pt[r] < c), "[cross_entropy_backward] target ", pt[r],
             " at row ", r, " is outside [0, ", c, ")");
  dispatch_float(logits_dtype, "cross_entropy_backward", [&](auto tag) {
    using T = decltype(tag);
    T* po = out.data<T>();
    parallel_for(n, std::max<int64_t>(1, kGrain / std::max<int64_t>(1, c)), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        T* __restrict o = po + r * c;
        const float* __restrict l = lp + r * c;
        const bool skip = pt[r] == ignore_index || saved.count == 0;
        if (skip) {
          for (int64_t i = 0; i < c; ++i) st(o, i, 0.f);
          continue;
        }
        for (int64_t i = 0; i < c; ++i) st(o, i, k * (exp_approx(l[i]) - (i == pt[r] ? 1.f : 0.f)));
      }
    });
  });
  return out;
}

}  // namespace zt::ops
