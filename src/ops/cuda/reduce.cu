// CUDA reductions: sum over everything (double, to the host), sums over one dimension of
// [outer, r, inner] with a factor, their backward expansion, and argmax over the last dimension.
#include "common.cuh"

namespace zt::ops::cuda {

namespace {

template <typename T>
struct ValueOf {
  const T* p;
  __device__ double operator()(int64_t i) const { return double(to_f(p[i])); }
};

// inner == 1: one warp per row of r contiguous values (rows_per_block warps per block).
template <typename T>
__global__ void sum_rows_warp(const T* x, T* o, int64_t outer, int64_t r, float factor) {
  const int64_t row = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (row >= outer) return;
  const int lane = int(threadIdx.x) & 31;
  const T* p = x + row * r;
  float s = 0.f;
  for (int64_t k = lane; k < r; k += 32) s += to_f(p[k]);
  s = warp_reduce(s, SumOp{});
  if (lane == 0) o[row] = from_f<T>(s * factor);
}

// inner == 1, few long rows: one block per row.
template <typename T>
__global__ void sum_rows_block(const T* x, T* o, int64_t r, float factor) {
  __shared__ float shm[32];
  const T* p = x + int64_t(blockIdx.x) * r;
  float s = 0.f;
  for (int64_t k = threadIdx.x; k < r; k += blockDim.x) s += to_f(p[k]);
  s = block_reduce(s, SumOp{}, 0.f, shm);
  if (threadIdx.x == 0) o[blockIdx.x] = from_f<T>(s * factor);
}

// inner > 1: thread per (outer, inner) element summing r-chunk blockIdx.y in order; with one
// chunk it writes the result, else f32 partials part[chunk][element].
template <typename T>
__global__ void sum_cols(const T* x, T* o, float* part, int64_t outer, int64_t r, int64_t inner, int64_t per,
                         float factor) {
  const int64_t m = outer * inner;
  const int64_t k0 = int64_t(blockIdx.y) * per, k1 = k0 + per < r ? k0 + per : r;
  for (int64_t e = global_index(); e < m; e += grid_stride()) {
    const int64_t ob = e / inner, i = e % inner;
    const T* p = x + ob * r * inner + i;
    float s = 0.f;
    for (int64_t k = k0; k < k1; ++k) s += to_f(p[k * inner]);
    if (part)
      part[int64_t(blockIdx.y) * m + e] = s;
    else
      o[e] = from_f<T>(s * factor);
  }
}

template <typename T>
__global__ void sum_chunks(const float* part, int64_t chunks, int64_t m, float factor, T* o) {
  for (int64_t e = global_index(); e < m; e += grid_stride()) {
    float s = 0.f;
    for (int64_t b = 0; b < chunks; ++b) s += part[b * m + e];
    o[e] = from_f<T>(s * factor);
  }
}

template <typename T>
__global__ void expand_kernel(const T* dy, T* o, int64_t n, int64_t r, int64_t inner, float factor) {
  for (int64_t e = global_index(); e < n; e += grid_stride()) {
    const int64_t w = e / inner, i = e % inner;
    o[e] = from_f<T>(to_f(dy[(w / r) * inner + i]) * factor);
  }
}

// The CPU's argmax: the first maximum wins and NaNs are never chosen, except that a NaN at
// index 0 gives 0 (nothing compares greater than it). One warp per row.
template <typename T>
__global__ void argmax_rows(const T* x, int32_t* o, int64_t rows, int64_t c) {
  const int64_t row = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (row >= rows) return;
  const int lane = int(threadIdx.x) & 31;
  const T* p = x + row * c;
  if (isnan(to_f(p[0]))) {
    if (lane == 0) o[row] = 0;
    return;
  }
  float bv = 0.f;
  int64_t bi = -1;
  for (int64_t j = lane; j < c; j += 32) {
    const float v = to_f(p[j]);
    if (isnan(v)) continue;
    if (bi < 0 || v > bv) {
      bv = v;
      bi = j;
    }
  }
  for (int off = 16; off > 0; off >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, bv, off);
    const int64_t oi = __shfl_xor_sync(0xffffffffu, bi, off);
    if (oi >= 0 && (bi < 0 || ov > bv || (ov == bv && oi < bi))) {
      bv = ov;
      bi = oi;
    }
  }
  if (lane == 0) o[row] = int32_t(bi);
}

}  // namespace

double sum_all(const Tensor& x) {
  Ctx ctx(x);
  const int64_t n = x.numel();
  if (n == 0) return 0.0;
  return dispatch_float(x.dtype(), "sum", [&](auto tag) {
    using T = typename decltype(tag)::type;
    return device_sum(ctx, ValueOf<T>{ptr<const T>(x)}, n);
  });
}

void sum_dim(const Tensor& x, int64_t outer, int64_t r, int64_t inner, float factor, Tensor& out) {
  Ctx ctx(x);
  const int64_t m = outer * inner;
  dispatch_float(x.dtype(), "sum", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* px = ptr<const T>(x);
    T* po = ptr<T>(out);
    if (inner == 1) {
      if (outer < 2048 && r >= 4096) {
        sum_rows_block<T><<<unsigned(outer), kThreads, 0, ctx.stream>>>(px, po, r, factor);
      } else {
        const int64_t per_block = kThreads / 32;
        sum_rows_warp<T><<<unsigned((outer + per_block - 1) / per_block), kThreads, 0, ctx.stream>>>(px, po, outer, r,
                                                                                                   factor);
      }
      return;
    }
    // Few outputs over a long r (a bias gradient: C columns of B T rows): split r into chunks
    // (grid y) until the device is full.
    const int64_t fill = filling_threads(ctx);
    const int64_t chunks = std::clamp<int64_t>(std::min<int64_t>((fill + m - 1) / m, (r + 31) / 32), 1, 1024);
    const int64_t per = (r + chunks - 1) / chunks;
    const dim3 grid(std::min<unsigned>(blocks_for(m), 65535u), unsigned(chunks));
    if (chunks == 1) {
      sum_cols<T><<<grid, kThreads, 0, ctx.stream>>>(px, po, nullptr, outer, r, inner, per, factor);
      return;
    }
    // Freed after enqueueing: the stream orders any reuse of this memory after these kernels.
    Tensor part = workspace({chunks, m}, DType::f32, x.device());
    sum_cols<T><<<grid, kThreads, 0, ctx.stream>>>(px, po, ptr<float>(part), outer, r, inner, per, factor);
    check_launch("sum");
    sum_chunks<T><<<blocks_for(m), kThreads, 0, ctx.stream>>>(ptr<const float>(part), chunks, m, factor, po);
  });
  check_launch("sum");
}

void expand_reduced(const Tensor& dy, int64_t outer, int64_t r, int64_t inner, float factor, Tensor& out) {
  Ctx ctx(dy);
  const int64_t n = outer * r * inner;
  dispatch_float(dy.dtype(), "expand_reduced", [&](auto tag) {
    using T = typename decltype(tag)::type;
    expand_kernel<T><<<blocks_for(n), kThreads, 0, ctx.stream>>>(ptr<const T>(dy), ptr<T>(out), n, r, inner, factor);
  });
  check_launch("expand_reduced");
}

void argmax(const Tensor& x, Tensor& out) {
  Ctx ctx(x);
  const int64_t c = x.size(-1), rows = x.numel() / c;
  const int64_t per_block = kThreads / 32;
  dispatch_float(x.dtype(), "argmax", [&](auto tag) {
    using T = typename decltype(tag)::type;
    argmax_rows<T><<<unsigned((rows + per_block - 1) / per_block), kThreads, 0, ctx.stream>>>(
        ptr<const T>(x), ptr<int32_t>(out), rows, c);
  });
  check_launch("argmax");
}

}  // namespace zt::ops::cuda
