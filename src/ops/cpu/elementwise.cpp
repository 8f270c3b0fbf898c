// Elementwise kernels: numpy-broadcasting binary ops, scalar ops, in-place accumulation and
// activations. bf16 values are widened to f32, computed, and rounded back once.
#include <algorithm>

#include "common.h"
#include "zt/ops/ops.h"

namespace zt::ops {

using detail::check_float;
using detail::dispatch_float;
using detail::ld;
using detail::st;

Shape broadcast_shape(const Shape& a, const Shape& b) {
  const size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    ZT_CHECK(da == db || da == 1 || db == 1, "[broadcast] shapes ", shape_str(a), " and ", shape_str(b),
             " are incompatible at dimension ", i, " (", da, " vs ", db, ")");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

namespace {

enum class BinOp { add, sub, mul };

template <BinOp op>
inline float apply(float x, float y) {
  if constexpr (op == BinOp::add) return x + y;
  if constexpr (op == BinOp::sub) return x - y;
  return x * y;
}

// Strides (in elements) of contiguous `s` seen through `out` shape, 0 on broadcast dims.
Shape broadcast_strides(const Shape& s, const Shape& out) {
  Shape st(out.size(), 0);
  Shape cs = contiguous_strides(s);
  const size_t lead = out.size() - s.size();
  for (size_t i = 0; i < s.size(); ++i) st[lead + i] = s[i] == 1 ? 0 : cs[i];
  return st;
}

// Inner loop over one output row; strides are 0 or 1 so each case vectorises.
template <BinOp op, typename T>
void row(const T* __restrict a, int64_t sa, const T* __restrict b, int64_t sb, T* __restrict o, int64_t n) {
  if (sa == 1 && sb == 1) {
    for (int64_t i = 0; i < n; ++i) st(o, i, apply<op>(ld(a, i), ld(b, i)));
  } else if (sa == 1) {
    const float y = ld(b, 0);
    for (int64_t i = 0; i < n; ++i) st(o, i, apply<op>(ld(a, i), y));
  } else if (sb == 1) {
    const float x = ld(a, 0);
    for (int64_t i = 0; i < n; ++i) st(o, i, apply<op>(x, ld(b, i)));
  } else {
    const float v = apply<op>(ld(a, 0), ld(b, 0));
    for (int64_t i = 0; i < n; ++i) st(o, i, v);
  }
}

template <BinOp op>
Tensor binary(const Tensor& a_in, const Tensor& b_in, const char* name) {
  check_float(a_in, name);
  check_float(b_in, name);
  detail::check_same_dtype(a_in, b_in, name);
  const Shape out_shape = broadcast_shape(a_in.shape(), b_in.shape());
  Tensor a = a_in.contiguous(), b = b_in.contiguous();
  Tensor out = Tensor::empty(out_shape, a.dtype());
  const int64_t n = out.numel();
  if (n == 0) return out;
  dispatch_float(a.dtype(), name, [&](auto tag) {
    using T = decltype(tag);
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    T* po = out.data<T>();
    if (a.shape() == b.shape()) {  // same shape: one flat loop
      parallel_for(n, kGrain, [&](int64_t s, int64_t e) { row<op>(pa + s, 1, pb + s, 1, po + s, e - s); });
      return;
    }
    const Shape sa = broadcast_strides(a.shape(), out_shape), sb = broadcast_strides(b.shape(), out_shape);
    const size_t nd = out_shape.size();
    const int64_t inner = out_shape[nd - 1], rows = n / inner;
    const int64_t ia = sa[nd - 1], ib = sb[nd - 1];
    parallel_for(rows, std::max<int64_t>(1, kGrain / inner), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        int64_t rem = r, oa = 0, ob = 0;
        for (size_t d = nd - 1; d-- > 0;) {
          const int64_t idx = rem % out_shape[d];
          rem /= out_shape[d];
          oa += idx * sa[d];
          ob += idx * sb[d];
        }
        row<op>(pa + oa, ia, pb + ob, ib, po + r * inner, inner);
      }
    });
  });
  return out;
}

// out = f(x) elementwise on a contiguous copy.
template <typename F>
Tensor unary(const Tensor& x_in, const char* name, F f) {
  check_float(x_in, name);
  Tensor x = x_in.contiguous();
  Tensor out = Tensor::empty(x.shape(), x.dtype());
  dispatch_float(x.dtype(), name, [&](auto tag) {
    using T = decltype(tag);
    const T* __restrict px = x.data<T>();
    T* __restrict po = out.data<T>();
    parallel_for(x.numel(), kGrain, [&](int64_t s, int64_t e) {
      for (int64_t i = s; i < e; ++i) st(po, i, f(ld(px, i)));
    });
  });
  return out;
}

// out = f(dy, x) elementwise (activation backward).
template <typename F>
Tensor unary_backward(const Tensor& dy_in, const Tensor& x_in, const char* name, F f) {
  check_float(dy_in, name);
  check_float(x_in, name);
  detail::check_same_dtype(dy_in, x_in, name);
  ZT_CHECK(dy_in.shape() == x_in.shape(), "[", name, "] dy ", shape_str(dy_in.shape()), " and x ",
           shape_str(x_in.shape()), " differ");
  Tensor dy = dy_in.contiguous(), x = x_in.contiguous();
  Tensor out = Tensor::empty(x.shape(), x.dtype());
  dispatch_float(x.dtype(), name, [&](auto tag) {
    using T = decltype(tag);
    const T* __restrict pd = dy.data<T>();
    const T* __restrict px = x.data<T>();
    T* __restrict po = out.data<T>();
    parallel_for(x.numel(), kGrain, [&](int64_t s, int64_t e) {
      for (int64_t i = s; i < e; ++i) st(po, i, f(ld(pd, i), ld(px, i)));
    });
  });
  return out;
}

constexpr float kGeluC = 0.7978845608028654f;  // sqrt(2/pi)
constexpr float kGeluA = 0.044715f;

}  // namespace

Tensor add(const Tensor& a, const Tensor& b) { return binary<BinOp::add>(a, b, "add"); }
Tensor sub(const Tensor& a, const Tensor& b) { return binary<BinOp::sub>(a, b, "sub"); }
Tensor mul(const Tensor& a, const Tensor& b) { return binary<BinOp::mul>(a, b, "mul"); }

Tensor scale(const Tensor& a, float s) {
  return unary(a, "scale", [s](float v) { return v * s; });
}
Tensor add_scalar(const Tensor& a, float s) {
  return unary(a, "add_scalar", [s](float v) { return v + s; });
}

Tensor sum_to(const Tensor& g_in, const Shape& shape) {
  check_float(g_in, "sum_to");
  const Shape& gs = g_in.shape();
  bool ok = shape.size() <= gs.size();
  for (size_t i = 0; ok && i < shape.size(); ++i) {
    const int64_t d = shape[i], g = gs[gs.size() - shape.size() + i];
    ok = d == g || d == 1;
  }
  ZT_CHECK(ok, "[sum_to] cannot reduce ", shape_str(gs), " to ", shape_str(shape));
  if (shape == gs) return g_in.clone();  // nothing to reduce (also covers 0-d)
  Tensor g = g_in.contiguous();
  Tensor out = Tensor::empty(shape, g.dtype());
  const int64_t n = g.numel(), m = out.numel();
  if (m == 0) return out;
  std::vector<float> acc(size_t(m), 0.f);
  if (n > 0) {
    const Shape so = broadcast_strides(shape, gs);
    const size_t nd = gs.size();
    const int64_t inner = gs[nd - 1], rows = n / inner, io = so[nd - 1];
    float* __restrict pa = acc.data();
    // Serial over rows so each output element sums in a fixed order (deterministic).
    dispatch_float(g.dtype(), "sum_to", [&](auto tag) {
      using T = decltype(tag);
      const T* pg = g.data<T>();
      for (int64_t r = 0; r < rows; ++r) {
        int64_t rem = r, oo = 0;
        for (size_t d = nd - 1; d-- > 0;) {
          oo += rem % gs[d] * so[d];
          rem /= gs[d];
        }
        const T* __restrict src = pg + r * inner;
        if (io == 1) {
          for (int64_t i = 0; i < inner; ++i) pa[oo + i] += ld(src, i);
        } else {
          float s = 0.f;
          for (int64_t i = 0; i < inner; ++i) s += ld(src, i);
          pa[oo] += s;
        }
      }
    });
  }
  dispatch_float(out.dtype(), "sum_to", [&](auto tag) {
    using T = decltype(tag);
    T* po = out.data<T>();
    for (int64_t i = 0; i < m; ++i) st(po, i, acc[size_t(i)]);
  });
  return out;
}

Tensor relu(const Tensor& x) {
  return unary(x, "relu", [](float v) { return v > 0.f ? v : 0.f; });
}
Tensor relu_backward(const Tensor& dy, const Tensor& x) {
  return unary_backward(dy, x, "relu_backward", [](float d, float v) { return v > 0.f ? d : 0.f; });
}

Tensor gelu(const Tensor& x) {
  return unary(x, "gelu", [](float v) {
    const float t = detail::tanh_approx(kGeluC * (v + kGeluA * v * v * v));
    return 0.5f * v * (1.f + t);
  });
}
Tensor gelu_backward(const Tensor& dy, const Tensor& x) {
  return unary_backward(dy, x, "gelu_backward", [](float d, float v) {
    const float t = detail::tanh_approx(kGeluC * (v + kGeluA * v * v * v));
    const float du = kGeluC * (1.f + 3.f * kGeluA * v * v);
    return d * (0.5f * (1.f + t) + 0.5f * v * (1.f - t * t) * du);
  });
}

}  // namespace zt::ops
