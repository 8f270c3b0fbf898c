// CPU kernels for whole-buffer precision work (casts, gradient scaling and accumulation, norms,
// overflow checks). Inputs are contiguous and validated by the contracts in src/ops/precision.cpp.
// Mixed dtypes convert blockwise to f32 (convert.h), compute, and round once.
#include <algorithm>
#include <bit>
#include <cstring>
#include <type_traits>
#include <vector>

#include "common.h"
#include "kernels.h"
#include "zt/ops/ops.h"

namespace zt::ops::cpu {

using detail::dispatch_float;

namespace {

template <typename T>
constexpr bool kIsF32 = std::is_same_v<T, float>;
constexpr int64_t kStreamCastBytes = int64_t(4) << 20;

// Applies f(values, len) to the f32 values of p[b, e) in place, block by block.
template <typename T, typename F>
void update_blocks(T* p, int64_t b, int64_t e, F&& f) {
  alignas(64) float buf[kBlock];
  for (int64_t i = b; i < e; i += kBlock) {
    const int64_t len = std::min(kBlock, e - i);
    if constexpr (kIsF32<T>) {
      f(p + i, len);
    } else {
      to_f32(p + i, buf, len);
      f(buf, len);
      from_f32(buf, p + i, len);
    }
  }
}

double fold_lanes(double* acc) {
  for (int w = 16; w >= 1; w /= 2)
    for (int j = 0; j < w; ++j) acc[j] += acc[j + w];
  return acc[0];
}

// 32 double lanes in a fixed order (as optim::sum_of_squares): vectorises, deterministic, and
// four vectors of independent sums, so the adds' latency does not bound the pass as 8 lanes did.
template <typename T>
double chunk_sum_of_squares(const T* p, int64_t n) {
  double acc[32] = {};
  if constexpr (std::is_same_v<T, bf16>) {  // widening is a shift: no pass through a block buffer
    const uint16_t* __restrict u = reinterpret_cast<const uint16_t*>(p);
    const auto wide = [u](int64_t i) { return double(std::bit_cast<float>(uint32_t(u[i]) << 16)); };
    int64_t i = 0;
    for (; i + 32 <= n; i += 32)
      for (int j = 0; j < 32; ++j) acc[j] += wide(i + j) * wide(i + j);
    for (; i < n; ++i) acc[0] += wide(i) * wide(i);  // the same lanes as the blocks below
    return fold_lanes(acc);
  }
  alignas(64) float buf[kBlock];
  for (int64_t b = 0; b < n; b += kBlock) {
    const int64_t len = std::min(kBlock, n - b);
    const float* __restrict v = as_f32(p + b, buf, len);
    int64_t i = 0;
    for (; i + 32 <= len; i += 32)
      for (int j = 0; j < 32; ++j) acc[j] += double(v[i + j]) * double(v[i + j]);
    for (; i < len; ++i) acc[0] += double(v[i]) * double(v[i]);  // only in a chunk's last block
  }
  return fold_lanes(acc);
}

// Raw bits with an all-ones exponent are inf or NaN; integer compares vectorise.
template <typename T>
bool chunk_nonfinite(const T* p, int64_t n) {
  int any = 0;
  if constexpr (kIsF32<T>) {
    const uint32_t* __restrict u = reinterpret_cast<const uint32_t*>(p);
    for (int64_t i = 0; i < n; ++i) any |= (u[i] & 0x7f800000u) == 0x7f800000u;
  } else {
    constexpr uint16_t mask = std::is_same_v<T, bf16> ? 0x7f80u : 0x7c00u;
    const uint16_t* __restrict u = reinterpret_cast<const uint16_t*>(p);
    for (int64_t i = 0; i < n; ++i) any |= (u[i] & mask) == mask;
  }
  return any != 0;
}

}  // namespace

void cast(const Tensor& src, Tensor& dst) {
  const int64_t n = src.numel();
  if (src.dtype() == dst.dtype()) {
    const size_t es = dtype_size(src.dtype());
    const char* s = static_cast<const char*>(src.raw_data());
    char* d = static_cast<char*>(dst.raw_data());
    parallel_for(n, kGrain, [&](int64_t b, int64_t e) { std::memcpy(d + b * es, s + b * es, size_t(e - b) * es); });
    return;
  }
  // A destination of 4 MiB or more is streamed (Note [streamed stores]): a whole buffer's cast
  // (the f32 copy of the weights a step widens, a product's cast into its bucket).
  const bool stream = kStreams && int64_t(dst.nbytes()) >= kStreamCastBytes;
  dispatch_float(src.dtype(), "cast", [&](auto s_tag) {
    using S = decltype(s_tag);
    dispatch_float(dst.dtype(), "cast", [&](auto d_tag) {
      using D = decltype(d_tag);
      const S* s = src.data<S>();
      D* d = dst.data<D>();
      parallel_for(n, kGrain, [&](int64_t b, int64_t e) {
        alignas(64) float buf[kBlock];
        alignas(64) D out[kBlock];
        for (int64_t i = b; i < e; i += kBlock) {
          const int64_t len = std::min(kBlock, e - i);
          D* to = stream ? out : d + i;
          if constexpr (kIsF32<S>) {
            from_f32(s + i, to, len);
          } else if constexpr (kIsF32<D>) {
            to_f32(s + i, to, len);
          } else {
            to_f32(s + i, buf, len);
            from_f32(buf, to, len);
          }
          if (stream) stream_block(d + i, out, len);
        }
        if (stream) _mm_sfence();
      });
    });
  });
}

void scale_(Tensor& x, float s) {
  dispatch_float(x.dtype(), "scale_", [&](auto tag) {
    using T = decltype(tag);
    T* p = x.data<T>();
    parallel_for(x.numel(), kGrain, [&](int64_t b, int64_t e) {
      update_blocks(p, b, e, [s](float* v, int64_t len) {
        for (int64_t i = 0; i < len; ++i) v[i] = v[i] * s;
      });
    });
  });
}

void axpy_(Tensor& dst, float alpha, const Tensor& src) {
  dispatch_float(dst.dtype(), "axpy_", [&](auto d_tag) {
    using D = decltype(d_tag);
    dispatch_float(src.dtype(), "axpy_", [&](auto s_tag) {
      using S = decltype(s_tag);
      D* d = dst.data<D>();
      const S* s = src.data<S>();
      parallel_for(dst.numel(), kGrain, [&](int64_t b, int64_t e) {
        alignas(64) float sbuf[kBlock];
        int64_t at = b;  // update_blocks visits [b, e) in order; track the matching src block
        update_blocks(d, b, e, [&](float* v, int64_t len) {
          const float* __restrict y = as_f32(s + at, sbuf, len);
          for (int64_t i = 0; i < len; ++i) v[i] = v[i] + alpha * y[i];
          at += len;
        });
      });
    });
  });
}

double sum_of_squares(const Tensor& x) {
  const int64_t n = x.numel();
  if (n == 0) return 0.0;
  return dispatch_float(x.dtype(), "sum_of_squares", [&](auto tag) {
    using T = decltype(tag);
    const T* p = x.data<T>();
    const int64_t chunks = (n + kReduceChunk - 1) / kReduceChunk;
    if (chunks == 1) return chunk_sum_of_squares(p, n);
    std::vector<double> part(size_t(chunks), 0.0);
    parallel_for(chunks, 1, [&](int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; ++c) {
        const int64_t b = c * kReduceChunk;
        part[size_t(c)] = chunk_sum_of_squares(p + b, std::min(n, b + kReduceChunk) - b);
      }
    });
    double total = 0.0;
    for (double v : part) total += v;  // fixed order: independent of the thread count
    return total;
  });
}

void sum_of_squares_to(const Tensor& x, Tensor& out, int64_t slot) {
  const double v = sum_of_squares(x);
  std::memcpy(static_cast<int64_t*>(out.raw_data()) + slot, &v, sizeof v);
}

bool has_nonfinite(const Tensor& x) {
  const int64_t n = x.numel();
  return dispatch_float(x.dtype(), "has_nonfinite", [&](auto tag) {
    using T = decltype(tag);
    const T* p = x.data<T>();
    const int64_t chunks = std::max<int64_t>(1, (n + kGrain - 1) / kGrain);
    std::vector<char> found(size_t(chunks), 0);
    parallel_for(n, kGrain, [&](int64_t b, int64_t e) { found[size_t(b / kGrain)] = chunk_nonfinite(p + b, e - b); });
    return std::any_of(found.begin(), found.end(), [](char f) { return f != 0; });
  });
}

}  // namespace zt::ops::cpu
