// CUDA kernels of the Llama family's ops (the CPU's cpu/llama_ops.cpp): RMSNorm forward and
// backward, rotary position embeddings on a packed q/k/v, and the SwiGLU product. f32 math with the
// CPU's operations in the CPU's order (zt_ops' CUDA code has no fused multiply-adds), one rounding
// per 16-bit output; only RMSNorm's sums (each row's, and dgamma's over blocks of rows) add in
// another fixed order than the CPU's, as layer norm's do.
#include <algorithm>

#include "common.cuh"

namespace zt::ops::cuda {

namespace {

__device__ __forceinline__ float sigmoid(float g) { return 1.f / (1.f + exp_approx(-g)); }

// ---- RMSNorm ----

// One block per row: rstd = 1 / sqrt(mean(x^2) + eps), then y = x * rstd * gamma.
template <typename T>
__global__ void rms_norm_rows(const T* px, const T* pres, const float* g, float eps, int64_t c, T* psum, T* py,
                              float* rstd) {
  __shared__ float shm[32];
  const int64_t r = blockIdx.x;
  const T* x = norm_input_row(px, pres, psum, r, c);
  T* y = py + r * c;
  float q = 0.f;
  for (int64_t i = threadIdx.x; i < c; i += blockDim.x) {
    const float v = to_f(x[i]);
    q += v * v;
  }
  const float s = 1.f / sqrtf(block_reduce(q, SumOp{}, 0.f, shm) / float(c) + eps);
  for (int64_t i = threadIdx.x; i < c; i += blockDim.x) y[i] = from_f<T>(to_f(x[i]) * s * g[i]);
  if (threadIdx.x == 0) rstd[r] = s;
}

// w = dy * gamma: dx = rstd * w - x * (mean(w * x) * rstd^3); one block per row.
template <typename T>
__global__ void rms_norm_dx_rows(const T* pd, const T* px, const float* g, const float* rstd, int64_t c, bool accumulate,
                                 T* pdx) {
  __shared__ float shm[32];
  const int64_t r = blockIdx.x;
  const T* d = pd + r * c;
  const T* x = px + r * c;
  T* o = pdx + r * c;
  const float s = rstd[r];
  float a = 0.f;
  for (int64_t i = threadIdx.x; i < c; i += blockDim.x) a += (to_f(d[i]) * g[i]) * to_f(x[i]);
  const float k = block_reduce(a, SumOp{}, 0.f, shm) / float(c) * s * s * s;
  for (int64_t i = threadIdx.x; i < c; i += blockDim.x)
    store_dx(o + i, s * (to_f(d[i]) * g[i]) - to_f(x[i]) * k, accumulate);
}

// Column sums of dy * (x * rstd) over the rows of row block blockIdx.y into part[block][c]: the
// first stage of a two-stage, atomic-free reduction (layer norm's, transformer.cu); column_total the second.
template <typename T>
__global__ void rms_norm_dg_part(const T* pd, const T* px, const float* rstd, int64_t rows, int64_t c, int64_t rows_per,
                                 float* part) {
  const int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= c) return;
  const int64_t r0 = int64_t(blockIdx.y) * rows_per, r1 = r0 + rows_per < rows ? r0 + rows_per : rows;
  float dg = 0.f;
  for (int64_t r = r0; r < r1; ++r) dg += to_f(pd[r * c + j]) * (to_f(px[r * c + j]) * rstd[r]);
  part[int64_t(blockIdx.y) * c + j] = dg;
}

// ---- rotary position embeddings (Note [rotary halves], cpu/llama_ops.cpp) ----

// One thread per element of out [rows][W]: the first `rotated` columns (q and k heads of D) pair
// feature i with i + D/2 of their head, by token t = row % T's angles; the rest (v) are copied.
template <typename T>
__global__ void rope_kernel(const T* x, const float* cos_t, const float* sin_t, int64_t n, int64_t T_, int64_t W,
                            int64_t D, int64_t rotated, float sign, T* o) {
  const int64_t half = D / 2;
  for (int64_t e = global_index(); e < n; e += grid_stride()) {
    const int64_t r = e / W, col = e % W;
    if (col >= rotated) {
      o[e] = x[e];
      continue;
    }
    const int64_t f = col % D, i = f < half ? f : f - half, t = r % T_;
    const float c = cos_t[t * half + i], si = sign * sin_t[t * half + i];
    const T* row = x + r * W + (col - f);  // the head's first feature
    const float a = to_f(row[i]), b = to_f(row[half + i]);
    o[e] = from_f<T>(f < half ? a * c - b * si : b * c + a * si);
  }
}

// ---- SwiGLU: gate_up [rows][2n] (gate, then up) ----

// out = silu(gate) * up, one thread per output.
template <typename T>
__global__ void swiglu_kernel(const T* x, int64_t total, int64_t n, T* o) {
  for (int64_t e = global_index(); e < total; e += grid_stride()) {
    const int64_t r = e / n, i = e % n;
    const float g = to_f(x[r * 2 * n + i]), u = to_f(x[r * 2 * n + n + i]);
    o[e] = from_f<T>(g * sigmoid(g) * u);
  }
}

// d gate = dy * up * sig * (1 + gate * (1 - sig)), d up = dy * silu(gate); one thread per dy.
template <typename T>
__global__ void swiglu_backward_kernel(const T* dy, const T* x, int64_t total, int64_t n, T* o) {
  for (int64_t e = global_index(); e < total; e += grid_stride()) {
    const int64_t r = e / n, i = e % n, at = r * 2 * n + i;
    const float d = to_f(dy[e]), g = to_f(x[at]), u = to_f(x[at + n]), sg = sigmoid(g);
    o[at] = from_f<T>(d * u * (sg * (1.f + g * (1.f - sg))));
    o[at + n] = from_f<T>(d * (g * sg));
  }
}

}  // namespace

void rms_norm(const Tensor& x, const Tensor* residual, const Tensor& gamma, float eps, Tensor* sum, Tensor& y,
              Tensor& rstd) {
  Ctx ctx(x);
  const int64_t c = x.size(-1), rows = x.numel() / c;
  const Tensor g = f32_copy(gamma);  // kept alive until the launch is enqueued
  dispatch_float(x.dtype(), "rms_norm", [&](auto tag) {
    using T = typename decltype(tag)::type;
    rms_norm_rows<T><<<unsigned(rows), row_threads(c), 0, ctx.stream>>>(
        ptr<const T>(x), residual ? ptr<const T>(*residual) : nullptr, ptr<const float>(g), eps, c,
        sum ? ptr<T>(*sum) : nullptr, ptr<T>(y), ptr<float>(rstd));
  });
  check_launch("rms_norm");
}

// dx per row; dgamma in two stages over fixed row blocks (no atomics: the same bits every run).
void rms_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma, const Tensor& rstd, bool accumulate,
                       Tensor& dx, Tensor& dgamma) {
  Ctx ctx(x);
  const int64_t c = x.size(-1), rows = x.numel() / c;
  const Tensor g = f32_copy(gamma);
  const int64_t nb = std::clamp<int64_t>((rows + 31) / 32, 1, 1024), rows_per = (rows + nb - 1) / nb;
  // Freed after enqueueing: the stream orders any reuse of this memory after these kernels.
  Tensor part = workspace({nb, c}, DType::f32, x.device());
  dispatch_float(x.dtype(), "rms_norm_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    rms_norm_dx_rows<T><<<unsigned(rows), row_threads(c), 0, ctx.stream>>>(
        ptr<const T>(dy), ptr<const T>(x), ptr<const float>(g), ptr<const float>(rstd), c, accumulate, ptr<T>(dx));
    check_launch("rms_norm_backward");
    const dim3 grid(unsigned((c + kThreads - 1) / kThreads), unsigned(nb));
    rms_norm_dg_part<T><<<grid, kThreads, 0, ctx.stream>>>(ptr<const T>(dy), ptr<const T>(x), ptr<const float>(rstd),
                                                           rows, c, rows_per, ptr<float>(part));
  });
  check_launch("rms_norm_backward");
  dispatch_float(gamma.dtype(), "rms_norm_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    column_total<T><<<blocks_for(c), kThreads, 0, ctx.stream>>>(ptr<const float>(part), nb, c, ptr<T>(dgamma));
  });
  check_launch("rms_norm_backward");
}

void rope(const Tensor& qkv, int64_t n_head, int64_t n_kv_head, const Tensor& cos, const Tensor& sin, bool inverse,
          Tensor& out) {
  Ctx ctx(qkv);
  const int64_t T_ = qkv.size(1), W = qkv.size(2), D = W / (n_head + 2 * n_kv_head), n = qkv.numel();
  const int64_t rotated = (n_head + n_kv_head) * D;
  dispatch_float(qkv.dtype(), "rope", [&](auto tag) {
    using T = typename decltype(tag)::type;
    rope_kernel<T><<<blocks_for(n), kThreads, 0, ctx.stream>>>(ptr<const T>(qkv), ptr<const float>(cos),
                                                               ptr<const float>(sin), n, T_, W, D, rotated,
                                                               inverse ? -1.f : 1.f, ptr<T>(out));
  });
  check_launch("rope");
}

void swiglu(const Tensor& gate_up, Tensor& out) {
  Ctx ctx(gate_up);
  const int64_t n = out.size(-1), total = out.numel();
  dispatch_float(gate_up.dtype(), "swiglu", [&](auto tag) {
    using T = typename decltype(tag)::type;
    swiglu_kernel<T><<<blocks_for(total), kThreads, 0, ctx.stream>>>(ptr<const T>(gate_up), total, n, ptr<T>(out));
  });
  check_launch("swiglu");
}

void swiglu_backward(const Tensor& dy, const Tensor& gate_up, Tensor& dgate_up) {
  Ctx ctx(gate_up);
  const int64_t n = dy.size(-1), total = dy.numel();
  dispatch_float(gate_up.dtype(), "swiglu_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    swiglu_backward_kernel<T><<<blocks_for(total), kThreads, 0, ctx.stream>>>(ptr<const T>(dy), ptr<const T>(gate_up),
                                                                              total, n, ptr<T>(dgate_up));
  });
  check_launch("swiglu_backward");
}

}  // namespace zt::ops::cuda
