// CPU embedding kernels. Forward copies rows; backward groups positions by row (a stable
// counting sort) so each output row sums its gradients in position order: no atomics, and the
// result is bitwise the same for any number of threads.
#include <algorithm>
#include <cstring>
#include <vector>

#include "common.h"
#include "kernels.h"

namespace zt::ops::cpu {

using detail::dispatch_float;

void embedding(const Tensor& weight, const Tensor& ids, Tensor& out) {
  const int64_t n = ids.numel(), c = weight.size(1);
  const size_t row_bytes = size_t(c) * dtype_size(weight.dtype());
  const int32_t* pi = ids.data<int32_t>();
  const char* pw = static_cast<const char*>(weight.raw_data());
  char* po = static_cast<char*>(out.raw_data());
  parallel_for(n, std::max<int64_t>(1, kGrain / std::max<int64_t>(1, c)), [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i)
      std::memcpy(po + size_t(i) * row_bytes, pw + size_t(pi[i]) * row_bytes, row_bytes);
  });
}

namespace {

// Row r of the gradient: the sum in position order of dy at ids == r, in f32. Dense: written
// (rounded to out's dtype; untouched rows 0). Adding: rounded to `grad` (the dense gradient's
// dtype) and added into out's row, untouched rows left alone (Note [row gradients]).
void embedding_backward_rows(const Tensor& dy, const Tensor& ids, bool add, DType grad, Tensor& out) {
  const int64_t n = ids.numel(), v = out.size(0), c = out.size(1);
  const int32_t* pi = ids.data<int32_t>();
  // start[r]..start[r+1]: the positions of row r in order[], ascending.
  std::vector<int64_t> start(size_t(v) + 1, 0), order(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) ++start[size_t(pi[i]) + 1];
  for (int64_t r = 0; r < v; ++r) start[size_t(r) + 1] += start[size_t(r)];
  {
    std::vector<int64_t> next(start.begin(), start.end() - 1);
    for (int64_t i = 0; i < n; ++i) order[size_t(next[size_t(pi[i])]++)] = i;
  }
  dispatch_float(dy.dtype(), "embedding_backward", [&](auto dt) {
    using U = decltype(dt);
    dispatch_float(out.dtype(), "embedding_backward", [&](auto ot) {
      using T = decltype(ot);
      const U* pd = dy.data<U>();
      T* po = out.data<T>();
      parallel_for(v, std::max<int64_t>(1, kGrain / std::max<int64_t>(1, c)), [&](int64_t r0, int64_t r1) {
        std::vector<float> acc(static_cast<size_t>(c)), buf(static_cast<size_t>(c));
        for (int64_t r = r0; r < r1; ++r) {
          T* row = po + r * c;
          const int64_t b = start[size_t(r)], e = start[size_t(r) + 1];
          if (b == e) {
            if (!add) std::memset(static_cast<void*>(row), 0, size_t(c) * sizeof(T));  // +0.0 in every float type
            continue;
          }
          float* __restrict a = add ? acc.data() : out_f32(row, acc.data());
          to_f32(pd + order[size_t(b)] * c, a, c);
          for (int64_t k = b + 1; k < e; ++k) {
            const float* __restrict g = as_f32(pd + order[size_t(k)] * c, buf.data(), c);
            for (int64_t j = 0; j < c; ++j) a[j] += g[j];
          }
          if (add) {
            round_to(grad, a, c);
            const float* __restrict have = as_f32(row, buf.data(), c);
            for (int64_t j = 0; j < c; ++j) a[j] = have[j] + a[j];
          }
          from_f32(a, row, c);
        }
      });
    });
  });
}

}  // namespace

void embedding_backward(const Tensor& dy, const Tensor& ids, Tensor& out) {
  embedding_backward_rows(dy, ids, false, out.dtype(), out);
}

void embedding_backward_add(const Tensor& dy, const Tensor& ids, DType grad, Tensor& out) {
  embedding_backward_rows(dy, ids, true, grad, out);
}

std::vector<int32_t> touched_rows(const Tensor& ids, int64_t num_rows) {
  const int32_t* pi = ids.data<int32_t>();
  const int64_t n = ids.numel();
  std::vector<int32_t> rows;
  if (n >= num_rows / 8) {  // dense enough: one pass over a row bitmap beats sorting
    std::vector<uint8_t> seen(size_t(num_rows), 0);
    for (int64_t i = 0; i < n; ++i) seen[size_t(pi[i])] = 1;
    for (int64_t r = 0; r < num_rows; ++r)
      if (seen[size_t(r)]) rows.push_back(int32_t(r));
    return rows;
  }
  rows.assign(pi, pi + n);
  std::sort(rows.begin(), rows.end());
  rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
  return rows;
}

}  // namespace zt::ops::cpu
