// CPU reduction kernels: sums over everything or one dimension, their backward expansion, and
// argmax. Sums accumulate in f32 lanes within blocks and in double across blocks.
#include <algorithm>
#include <vector>

#include "common.h"
#include "kernels.h"

namespace zt::ops::cpu {

using detail::dispatch_float;
using detail::ld;
using detail::st;

namespace {

// Sum of n contiguous values: 8 f32 lanes per block, blocks combined in double.
template <typename T>
double sum_block(const T* p, int64_t n) {
  alignas(64) float buf[kBlock];
  double total = 0;
  for (int64_t b = 0; b < n; b += kBlock) {
    const int64_t len = std::min(kBlock, n - b);
    const float* __restrict v = as_f32(p + b, buf, len);
    float lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t i = 0;
    for (; i + 8 <= len; i += 8)
      for (int k = 0; k < 8; ++k) lane[k] += v[i + k];
    float s = 0;
    for (; i < len; ++i) s += v[i];
    for (int k = 0; k < 8; ++k) s += lane[k];
    total += s;
  }
  return total;
}

}  // namespace

double sum_all(const Tensor& x) {
  const int64_t n = x.numel();
  return dispatch_float(x.dtype(), "sum", [&](auto tag) {
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
}

void sum_dim(const Tensor& x, int64_t outer, int64_t r, int64_t inner, float factor, Tensor& out) {
  dispatch_float(x.dtype(), "sum", [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.data<T>();
    T* po = out.data<T>();
    if (inner == 1) {  // reducing the innermost dimension: one contiguous sum per row
      parallel_for(outer, std::max<int64_t>(1, kGrain / std::max<int64_t>(1, r)), [&](int64_t o0, int64_t o1) {
        for (int64_t o = o0; o < o1; ++o) st(po, o, float(sum_block(px + o * r, r)) * factor);
      });
      return;
    }
    // Otherwise accumulate whole inner rows; work items are (outer, inner chunk).
    constexpr int64_t kChunk = 1024;
    const int64_t nchunk = (inner + kChunk - 1) / kChunk;
    const int64_t grain = std::max<int64_t>(1, kGrain / std::max<int64_t>(1, r * std::min(inner, kChunk)));
    parallel_for(outer * nchunk, grain, [&](int64_t w0, int64_t w1) {
      std::vector<float> acc(static_cast<size_t>(std::min(inner, kChunk))), buf(acc.size());
      for (int64_t w = w0; w < w1; ++w) {
        const int64_t o = w / nchunk, c0 = (w % nchunk) * kChunk, len = std::min(kChunk, inner - c0);
        float* __restrict a = acc.data();
        std::fill(a, a + len, 0.f);
        for (int64_t k = 0; k < r; ++k) {
          const float* __restrict src = as_f32(px + (o * r + k) * inner + c0, buf.data(), len);
          for (int64_t i = 0; i < len; ++i) a[i] += src[i];
        }
        for (int64_t i = 0; i < len; ++i) a[i] *= factor;
        from_f32(a, po + o * inner + c0, len);
      }
    });
  });
}

void expand_reduced(const Tensor& dy, int64_t outer, int64_t r, int64_t inner, float factor, Tensor& out) {
  dispatch_float(dy.dtype(), "expand_reduced", [&](auto tag) {
    using T = decltype(tag);
    const T* pd = dy.data<T>();
    T* po = out.data<T>();
    parallel_for(outer * r, std::max<int64_t>(1, kGrain / std::max<int64_t>(1, inner)), [&](int64_t w0, int64_t w1) {
      for (int64_t w = w0; w < w1; ++w) {
        const T* __restrict src = pd + (w / r) * inner;
        T* __restrict dst = po + w * inner;
        for (int64_t i = 0; i < inner; ++i) st(dst, i, ld(src, i) * factor);
      }
    });
  });
}

void argmax(const Tensor& x, Tensor& out) {
  const int64_t c = x.size(-1), rows = x.numel() / c;
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
}

}  // namespace zt::ops::cpu
