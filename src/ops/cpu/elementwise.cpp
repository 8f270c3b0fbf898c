// CPU elementwise kernels: numpy-broadcasting binary ops, scalar ops and activations. Values
// are converted blockwise to f32 (convert.h), computed, and rounded once to the output dtype.
#include <algorithm>
#include <vector>

#include "common.h"
#include "kernels.h"

namespace zt::ops::cpu {

using detail::dispatch_float;
using detail::ld;
using detail::st;

namespace {

template <Binary op>
inline float apply(float x, float y) {
  if constexpr (op == Binary::add) return x + y;
  if constexpr (op == Binary::sub) return x - y;
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

// f32 values of n elements at p with stride 0 (one value repeated) or 1.
template <typename T>
const float* values(const T* p, int64_t stride, float* buf, int64_t n) {
  if (stride == 1) return as_f32(p, buf, n);
  std::fill(buf, buf + n, ld(p, 0));
  return buf;
}

// o[0..n) = a op b where a and b step by 0 or 1, block by block.
template <Binary op, typename T>
void row(const T* a, int64_t sa, const T* b, int64_t sb, T* o, int64_t n) {
  alignas(64) float ba[kBlock], bb[kBlock], bo[kBlock];
  for (int64_t i = 0; i < n; i += kBlock) {
    const int64_t len = std::min(kBlock, n - i);
    const float* __restrict x = values(a + i * sa, sa, ba, len);
    const float* __restrict y = values(b + i * sb, sb, bb, len);
    float* __restrict r = out_f32(o + i, bo);
    for (int64_t k = 0; k < len; ++k) r[k] = apply<op>(x[k], y[k]);
    from_f32(r, o + i, len);
  }
}

template <Binary op>
void binary_impl(const Tensor& a, const Tensor& b, Tensor& out) {
  const Shape& out_shape = out.shape();
  const int64_t n = out.numel();
  dispatch_float(a.dtype(), "binary", [&](auto tag) {
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
}

// o = f(x) on f32 blocks; f(const float* x, float* o, len).
template <typename F>
void map1(const Tensor& x, Tensor& out, F f) {
  dispatch_float(x.dtype(), "unary", [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.data<T>();
    T* po = out.data<T>();
    parallel_for(x.numel(), kGrain, [&](int64_t s, int64_t e) {
      alignas(64) float bx[kBlock], bo[kBlock];
      for (int64_t i = s; i < e; i += kBlock) {
        const int64_t len = std::min(kBlock, e - i);
        float* r = out_f32(po + i, bo);
        f(as_f32(px + i, bx, len), r, len);
        from_f32(r, po + i, len);
      }
    });
  });
}

// o = f(dy, x) on f32 blocks; f(const float* dy, const float* x, float* o, len).
template <typename F>
void map2(const Tensor& dy, const Tensor& x, Tensor& out, F f) {
  dispatch_float(x.dtype(), "unary_backward", [&](auto tag) {
    using T = decltype(tag);
    const T* pd = dy.data<T>();
    const T* px = x.data<T>();
    T* po = out.data<T>();
    parallel_for(x.numel(), kGrain, [&](int64_t s, int64_t e) {
      alignas(64) float bd[kBlock], bx[kBlock], bo[kBlock];
      for (int64_t i = s; i < e; i += kBlock) {
        const int64_t len = std::min(kBlock, e - i);
        float* r = out_f32(po + i, bo);
        f(as_f32(pd + i, bd, len), as_f32(px + i, bx, len), r, len);
        from_f32(r, po + i, len);
      }
    });
  });
}

// n columns of one row: o = d * gelu'(v), acc += o (the row's share of the bias gradient, f32).
// Grad is one of approx.h's GELU derivatives, the one gelu_backward uses, so dh equals its.
template <float (*Grad)(float)>
inline void gelu_bias_cols(const float* __restrict d, const float* __restrict v, float* __restrict o,
                           float* __restrict acc, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = d[i] * Grad(v[i]);
    o[i] = g;
    acc[i] += g;
  }
}

}  // namespace

void binary(Binary op, const Tensor& a, const Tensor& b, Tensor& out) {
  kern::with_binary(op, [&](auto o) { binary_impl<decltype(o)::value>(a, b, out); });
}

void unary(Unary op, float s, const Tensor& x, Tensor& out) {
  switch (op) {
    case Unary::scale:
      return map1(x, out, [s](const float* __restrict v, float* __restrict o, int64_t n) {
        for (int64_t i = 0; i < n; ++i) o[i] = v[i] * s;
      });
    case Unary::add_scalar:
      return map1(x, out, [s](const float* __restrict v, float* __restrict o, int64_t n) {
        for (int64_t i = 0; i < n; ++i) o[i] = v[i] + s;
      });
    case Unary::relu:
      return map1(x, out, [](const float* __restrict v, float* __restrict o, int64_t n) {
        for (int64_t i = 0; i < n; ++i) o[i] = v[i] > 0.f ? v[i] : 0.f;
      });
    case Unary::gelu:
      return map1(x, out, [](const float* __restrict v, float* __restrict o, int64_t n) {
        for (int64_t i = 0; i < n; ++i) o[i] = detail::gelu_tanh(v[i]);
      });
    case Unary::gelu_erf:
      return map1(x, out, [](const float* __restrict v, float* __restrict o, int64_t n) {
        for (int64_t i = 0; i < n; ++i) o[i] = detail::gelu_erf(v[i]);
      });
    case Unary::tanh:
      return map1(x, out, [](const float* __restrict v, float* __restrict o, int64_t n) {
        for (int64_t i = 0; i < n; ++i) o[i] = detail::tanh_approx(v[i]);
      });
  }
}

void unary_backward(Unary op, const Tensor& dy, const Tensor& x, Tensor& out) {
  switch (op) {
    case Unary::relu:
      return map2(dy, x, out, [](const float* __restrict d, const float* __restrict v, float* __restrict o, int64_t n) {
        for (int64_t i = 0; i < n; ++i) o[i] = v[i] > 0.f ? d[i] : 0.f;
      });
    case Unary::gelu:
      return map2(dy, x, out, [](const float* __restrict d, const float* __restrict v, float* __restrict o, int64_t n) {
        for (int64_t i = 0; i < n; ++i) o[i] = d[i] * detail::gelu_tanh_grad(v[i]);
      });
    case Unary::gelu_erf:
      return map2(dy, x, out, [](const float* __restrict d, const float* __restrict v, float* __restrict o, int64_t n) {
        for (int64_t i = 0; i < n; ++i) o[i] = d[i] * detail::gelu_erf_grad(v[i]);
      });
    case Unary::tanh:  // from the input: d * (1 - tanh(v)^2)
      return map2(dy, x, out, [](const float* __restrict d, const float* __restrict v, float* __restrict o, int64_t n) {
        for (int64_t i = 0; i < n; ++i) {
          const float t = detail::tanh_approx(v[i]);
          o[i] = d[i] * (1.f - t * t);
        }
      });
    default:
      ZT_THROW("[unary_backward] no backward kernel for this op");
  }
}

// Note [fused bias-gelu]: Linear then GELU's backward needs dh = dy * gelu'(h) and db = sum_rows dh;
// done apart, that is two passes over [rows, C] (llm.c fuses them too). Here each fixed block of
// kBiasGradBlockRows rows keeps its f32 column sums while it writes dh; blocks then add in block order.
void gelu_bias_backward(const Tensor& dy, const Tensor& h, bool erf, Tensor& dh, Tensor& db) {
  const int64_t c = h.size(-1), rows = h.numel() / c;
  const int64_t blocks = (rows + kBiasGradBlockRows - 1) / kBiasGradBlockRows;
  std::vector<float> part(size_t(blocks) * size_t(c), 0.f);  // block b's sums at [b * c, (b + 1) * c)
  dispatch_float(h.dtype(), "gelu_bias_backward", [&](auto tag) {
    using T = decltype(tag);
    const T* pd = dy.data<T>();
    const T* ph = h.data<T>();
    T* po = dh.data<T>();
    const int64_t grain = std::max<int64_t>(1, kGrain / (kBiasGradBlockRows * c));
    parallel_for(blocks, grain, [&](int64_t b0, int64_t b1) {
      alignas(64) float bd[kBlock], bh[kBlock], bo[kBlock];
      for (int64_t b = b0; b < b1; ++b) {
        float* acc = part.data() + size_t(b) * size_t(c);
        for (int64_t r = b * kBiasGradBlockRows; r < std::min(rows, (b + 1) * kBiasGradBlockRows); ++r)
          for (int64_t j = 0; j < c; j += kBlock) {  // columns in conversion blocks (16-bit inputs)
            const int64_t len = std::min(kBlock, c - j), at = r * c + j;
            float* o = out_f32(po + at, bo);
            const float *pdf = as_f32(pd + at, bd, len), *phf = as_f32(ph + at, bh, len);
            if (erf)
              gelu_bias_cols<detail::gelu_erf_grad>(pdf, phf, o, acc + j, len);
            else
              gelu_bias_cols<detail::gelu_tanh_grad>(pdf, phf, o, acc + j, len);
            from_f32(o, po + at, len);
          }
      }
    });
  });
  // Block sums into block 0's, in block order; columns in parallel.
  float* tot = part.data();
  parallel_for(c, std::max<int64_t>(1, kGrain / blocks), [&](int64_t j0, int64_t j1) {
    for (int64_t b = 1; b < blocks; ++b) {
      const float* __restrict p = part.data() + size_t(b) * size_t(c);
      float* __restrict t = tot;
      for (int64_t j = j0; j < j1; ++j) t[j] += p[j];
    }
  });
  dispatch_float(db.dtype(), "gelu_bias_backward", [&](auto tag) {
    using T = decltype(tag);
    from_f32(tot, db.data<T>(), c);
  });
}

void sum_to(const Tensor& g, Tensor& out) {
  const Shape& gs = g.shape();
  const Shape& shape = out.shape();
  const int64_t n = g.numel(), m = out.numel();
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
      std::vector<float> buf(static_cast<size_t>(inner));
      for (int64_t r = 0; r < rows; ++r) {
        int64_t rem = r, oo = 0;
        for (size_t d = nd - 1; d-- > 0;) {
          oo += rem % gs[d] * so[d];
          rem /= gs[d];
        }
        const float* __restrict src = as_f32(pg + r * inner, buf.data(), inner);
        if (io == 1) {
          for (int64_t i = 0; i < inner; ++i) pa[oo + i] += src[i];
        } else {
          float s = 0.f;
          for (int64_t i = 0; i < inner; ++i) s += src[i];
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
}

}  // namespace zt::ops::cpu
