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
template <typename Row>
void norm_rows(const Tensor& x, Tensor& y, const char* op, Row&& row) {
  const int64_t c = x.size(-1), rows = x.numel() / c;
  detail::dispatch_float(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.data<T>();
    T* py = y.data<T>();
    parallel_for(rows, row_grain(c), [&](int64_t r0, int64_t r1) {
      std::vector<float> xb(static_cast<size_t>(c)), yb(static_cast<size_t>(c));
      for (int64_t r = r0; r < r1; ++r) {
        float* __restrict yr = out_f32(py + r * c, yb.data());
        row(r, as_f32(px + r * c, xb.data(), c), yr);
        from_f32(yr, py + r * c, c);
      }
    });
  });
}

// Backward over fixed chunks of `grain` rows (so per-chunk sums do not depend on threads):
// row(chunk, r, x_r, dy_r, dx_r, scratch) with a per-thread scratch row of c floats.
template <typename Row>
void norm_chunks(const Tensor& dy, const Tensor& x, Tensor& dx, int64_t grain, const char* op, Row&& row) {
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
          float* __restrict o = out_f32(po + r * c, ob.data());
          row(ch, r, as_f32(px + r * c, xb.data(), c), as_f32(pd + r * c, db.data(), c), o, wb.data());
          from_f32(o, po + r * c, c);
        }
    });
  });
}

}  // namespace zt::ops::cpu
