#pragma once
// The row loops of the CPU norms (layer_norm.cpp, llama_ops.cpp's RMSNorm): each row in f32, a
// 16-bit one widened into a per-thread buffer and its result rounded once on the way out.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "common.h"

namespace zt::ops::cpu {

// Rows per work item: about kGrain values, so small inputs stay on one thread.
inline int64_t row_grain(int64_t c) { return std::max<int64_t>(1, kGrain / std::max<int64_t>(1, c)); }

// Forward: row(r, x_r, y_r) for each row of x [rows, c], rows in parallel; y_r goes to y's row r.
// With a residual, the row normalised is x + residual, rounded to x's dtype and written to `sum`
// first (the values ops::add makes), so the fused pass equals add then norm bit for bit.
template <typename Row>
void norm_rows(const Tensor& x, const Tensor* residual, Tensor* sum, Tensor& y, const char* op, Row&& row) {
  const int64_t c = x.size(-1), rows = x.numel() / c;
  detail::dispatch_float(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.data<T>();
    const T* pres = residual ? residual->data<T>() : nullptr;
    T* psum = sum ? sum->data<T>() : nullptr;
    T* py = y.data<T>();
    parallel_for(rows, row_grain(c), [&](int64_t r0, int64_t r1) {
      const auto n = static_cast<size_t>(c);
      std::vector<float> xb(n), yb(n), rb(pres ? n : 0), hb(pres ? n : 0);
      for (int64_t r = r0; r < r1; ++r) {
        const float* xr = as_f32(px + r * c, xb.data(), c);  // re-pointed at the sum below
        if (pres) {
          const float* __restrict rr = as_f32(pres + r * c, rb.data(), c);
          float* __restrict h = hb.data();
          for (int64_t j = 0; j < c; ++j) h[j] = xr[j] + rr[j];
          from_f32(h, psum + r * c, c);
          xr = as_f32(psum + r * c, h, c);  // the rounded sum, as the unfused norm would read it
        }
        float* __restrict yr = out_f32(py + r * c, yb.data());
        row(r, xr, yr);
        from_f32(yr, py + r * c, c);
      }
    });
  });
}

// Backward over fixed chunks of `grain` rows (so per-chunk sums do not depend on threads):
// row(chunk, r, x_r, dy_r, dx_r, scratch) with a per-thread scratch row of c floats. accumulate:
// dx's values are a gradient already (the residual's), and the row's values add to them, rounded once.
template <typename Row>
void norm_chunks(const Tensor& dy, const Tensor& x, bool accumulate, Tensor& dx, int64_t grain, const char* op,
                 Row&& row) {
  const int64_t c = x.size(-1), rows = x.numel() / c, chunks = (rows + grain - 1) / grain;
  detail::dispatch_float(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.data<T>();
    const T* pd = dy.data<T>();
    T* po = dx.data<T>();
    parallel_for(chunks, 1, [&](int64_t c0, int64_t c1) {
      const auto n = static_cast<size_t>(c);
      std::vector<float> xb(n), db(n), ob(n), wb(n);
      for (int64_t ch = c0; ch < c1; ++ch)
        for (int64_t r = ch * grain; r < std::min(rows, (ch + 1) * grain); ++r) {
          float* __restrict o = accumulate ? ob.data() : out_f32(po + r * c, ob.data());
          row(ch, r, as_f32(px + r * c, xb.data(), c), as_f32(pd + r * c, db.data(), c), o, wb.data());
          if (accumulate) {
            const float* __restrict prev = as_f32(po + r * c, xb.data(), c);  // x's row is read already
            for (int64_t j = 0; j < c; ++j) o[j] = prev[j] + o[j];
          }
          from_f32(o, po + r * c, c);
        }
    });
  });
}

}  // namespace zt::ops::cpu
