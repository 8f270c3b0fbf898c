// Reductions (sum/mean over all elements or one dimension), their backward expansion, and
// argmax metrics. Sums accumulate in f32 within blocks and in double across blocks.
#include <algorithm>
#include <vector>

#include "common.h"
#include "zt/ops/ops.h"

namespace zt::ops {

using detail::check_float;
using detail::dispatch_float;
using detail::ld;
using detail::st;

namespace {

int64_t norm_dim(int64_t d, int64_t nd, const char* op) {
  if (d < 0) d += nd;
  ZT_CHECK(d >= 0 && d < nd, "[", op, "] dimension ", d, " out of range for a ", nd, "-d tensor");
  return d;
}

// x viewed as [outer, r, inner] around dimension d.
struct Split {
  int64_t outer = 1, r = 1, inner = 1;
};
Split split(const Shape& s, int64_t d) {
  Split p;
  for (int64_t i = 0; i < int64_t(s.size()); ++i) {
    if (i < d) p.outer *= s[size_t(i)];
    else if (i == d) p.r = s[size_t(i)];
    else p.inner *= s[size_t(i)];
  }
  return p;
}

Shape reduced_shape(const Shape& s, int64_t d, bool keepdim) {
  Shape out = s;
  if (keepdim) out[size_t(d)] = 1;
  else out.erase(out.begin() + d);
  return out;
}

// Sum of n contiguous values: 8 f32 lanes per block, blocks combined in double.
template <typename T>
double sum_block(const T* __restrict p, int64_t n) {
  double total = 0;
  constexpr int64_t kBlock = 4096;
  for (int64_t b = 0; b < n; b += kBlock) {
    const int64_t e = std::min(n, b + kBlock);
    float lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t i = b;
    for (; i + 8 <= e; i += 8)
      for (int k = 0; k < 8; ++k) lane[k] += ld(p, i + k);
    float s = 0;
    for (; i < e; ++i) s += ld(p, i);
    for (int k = 0; k < 8; ++k) s += lane[k];
    total += s;
  }
  return total;
}

Tensor sum_all(const Tensor& x_in, float factor, const char* op) {
  check_float(x_in, op);
  Tensor x = x_in.contiguous();
  const int64_t n = x.numel();
  double total = dispatch_float(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    const T* p = x.data<T>();
    const int64_t chunks = std::max<int64_t>(1, std::min<int64_t>(64, n / kGrain));
    std::vector<double> part(size_t(chunks), 0.0);
    const int64_t per = (n + chunks - 1) / chunks;
    parallel_for(chunks, 1, [&](int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; ++c) {
        const int64_t b = c * per, e = std::min(n, b + per);
        if (b < e) part[size_t(c)] = sum_block(p + b, e - b);
      }
    });
    double t = 0;
    for (double v : part) t += v;
    return t;
  });
  return Tensor::full({}, float(total * factor), x.dtype());
}

Tensor sum_dim(const Tensor& x_in, int64_t dim, bool keepdim, bool mean, const char* op) {
  check_float(x_in, op);
  const int64_t d = norm_dim(dim, x_in.dim(), op);
  Tensor x = x_in.contiguous();
  const Split p = split(x.shape(), d);
  Tensor out = Tensor::empty(reduced_shape(x.shape(), d, keepdim), x.dtype());
  if (out.numel() == 0) return out;
  const float factor = mean ? 1.f / float(p.r) : 1.f;
  dispatch_float(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.data<T>();
    T* po = out.data<T>();
    if (p.inner == 1) {  // reducing the innermost dimension: one contiguous sum per row
      parallel_for(p.outer, std::max<int64_t>(1, kGrain / std::max<int64_t>(1, p.r)), [&](int64_t o0, int64_t o1) {
        for (int64_t o = o0; o < o1; ++o) st(po, o, float(sum_block(px + o * p.r, p.r)) * factor);
      });
      return;
    }
    // Otherwise accumulate whole inner rows; work items are (outer, inner chunk).
    constexpr int64_t kChunk = 1024;
    const int64_t nchunk = (p.inner + kChunk - 1) / kChunk;
    const int64_t grain = std::max<int64_t>(1, kGrain / std::max<int64_t>(1, p.r * std::min(p.inner, kChunk)));
    parallel_for(p.outer * nchunk, grain, [&](int64_t w0, int64_t w1) {
      std::vector<float> acc(static_cast<size_t>(std::min(p.inner, kChunk)));
      for (int64_t w = w0; w < w1; ++w) {
        const int64_t o = w / nchunk, c0 = (w % nchunk) * kChunk, len = std::min(kChunk, p.inner - c0);
        float* __restrict a = acc.data();
        std::fill(a, a + len, 0.f);
        for (int64_t r = 0; r < p.r; ++r) {
          const T* __restrict src = px + (o * p.r + r) * p.inner + c0;
          for (int64_t i = 0; i < len; ++i) a[i] += ld(src, i);
        }
        T* dst = po + o * p.inner + c0;
        for (int64_t i = 0; i < len; ++i) st(dst, i, a[i] * factor);
      }
    });
  });
  return out;
}

}  // namespace

Tensor sum(const Tensor& x) { return sum_all(x, 1.f, "sum"); }
Tensor mean(const Tensor& x) {
  check_float(x, "mean");
  return sum_all(x, 1.f / float(x.numel()), "mean");
}
Tensor sum(const Tensor& x, int64_t dim, bool keepdim) { return sum_dim(x, dim, keepdim, false, "sum"); }
Tensor mean(const Tensor& x, int64_t dim, bool keepdim) { return sum_dim(x, dim, keepdim, true, "mean"); }

Tensor expand_reduced(const Tensor& dy_in, const Shape& in_shape, int64_t dim, bool keepdim, float factor) {
  check_float(dy_in, "expand_reduced");
  const int64_t d = norm_dim(dim, int64_t(in_shape.size()), "expand_reduced");
  ZT_CHECK(dy_in.shape() == reduced_shape(in_shape, d, keepdim), "[expand_reduced] dy ", shape_str(dy_in.shape()),
           " is not ", shape_str(in_shape), " reduced over dimension ", d);
  Tensor dy = dy_in.contiguous();
  Tensor out = Tensor::empty(in_shape, dy.dtype());
  const Split p = split(in_shape, d);
  dispatch_float(dy.dtype(), "expand_reduced", [&](auto tag) {
    using T = decltype(tag);
    const T* pd = dy.data<T>();
    T* po = out.data<T>();
    parallel_for(p.outer * p.r, std::max<int64_t>(1, kGrain / std::max<int64_t>(1, p.inner)),
                 [&](int64_t w0, int64_t w1) {
                   for (int64_t w = w0; w < w1; ++w) {
                     const T* __restrict src = pd + (w / p.r) * p.inner;
                     T* __restrict dst = po + w * p.inner;
                     for (int64_t i = 0; i < p.inner; ++i) st(dst, i, ld(src, i) * factor);
                   }
                 });
  });
  return out;
}

Tensor argmax(const Tensor& x_in) {
  check_float(x_in, "argmax");
  ZT_CHECK(x_in.dim() >= 1 && x_in.size(-1) > 0, "[argmax] needs a non-empty last dimension, got ",
           shape_str(x_in.shape()));
  Tensor x = x_in.contiguous();
  const int64_t c = x.size(-1), rows = x.numel() / c;
  Shape os(x.shape().begin(), x.shape().end() - 1);
  Tensor out = Tensor::empty(os, DType::i32);
  int32_t* po = out.data<int32_t>();
  dispatch_float(x.dtype(), "argmax", [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.data<T>();
    parallel_for(rows, std::max<int64_t>(1, kGrain / c), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const T* row = px + r * c;
        int64_t best = 0;
        float bv = ld(row, 0);
        for (int64_t j = 1; j < c; ++j) {
          const float v = ld(row, j);
          if (v > bv) {  // first maximum wins, as in torch
            bv = v;
            best = j;
          }
        }
        po[r] = int32_t(best);
      }
    });
  });
  return out;
}

int64_t count_correct(const Tensor& logits, const Tensor& targets) {
  Tensor pred = argmax(logits);
  ZT_CHECK(targets.dtype() == DType::i32 && targets.shape() == pred.shape(), "[count_correct] targets must be i32 ",
           shape_str(pred.shape()), ", got ", dtype_name(targets.dtype()), " ", shape_str(targets.shape()));
  Tensor t = targets.contiguous();
  const int32_t* pp = pred.data<int32_t>();
  const int32_t* pt = t.data<int32_t>();
  int64_t n = 0;
  for (int64_t i = 0; i < pred.numel(); ++i) n += pp[i] == pt[i];
  return n;
}

}  // namespace zt::ops
