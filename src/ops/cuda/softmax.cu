// CUDA softmax family over the last dimension and the fused cross-entropy rows: one block per
// row, f32 math with the CPU's exp (max-subtracted), whatever the storage dtypes.
#include "common.cuh"

namespace zt::ops::cuda {

namespace {

template <typename T>
__device__ float row_max(const T* x, int64_t c, float* shm) {
  float m = -INFINITY;
  for (int64_t i = threadIdx.x; i < c; i += blockDim.x) m = fmaxf(m, to_f(x[i]));
  return block_reduce(m, MaxOp{}, -INFINITY, shm);
}

template <typename T>
__device__ float row_sum_exp(const T* x, int64_t c, float m, float* shm) {
  float s = 0.f;
  for (int64_t i = threadIdx.x; i < c; i += blockDim.x) s += exp_approx(to_f(x[i]) - m);
  return block_reduce(s, SumOp{}, 0.f, shm);
}

// log: y = x - (m + log(sum)); else y = exp(x - m) / sum (as a multiply by its inverse).
template <typename T, typename U>
__global__ void softmax_rows(const T* px, U* po, int64_t c, bool log) {
  __shared__ float shm[32];
  const T* x = px + int64_t(blockIdx.x) * c;
  U* y = po + int64_t(blockIdx.x) * c;
  const float m = row_max(x, c, shm);
  const float s = row_sum_exp(x, c, m, shm);
  if (log) {
    const float lse = m + logf(s);
    for (int64_t i = threadIdx.x; i < c; i += blockDim.x) y[i] = from_f<U>(to_f(x[i]) - lse);
  } else {
    const float inv = 1.f / s;
    for (int64_t i = threadIdx.x; i < c; i += blockDim.x) y[i] = from_f<U>(exp_approx(to_f(x[i]) - m) * inv);
  }
}

// softmax: dx = y * (dy - sum(dy*y)); log_softmax: dx = dy - exp(y) * sum(dy).
template <typename T>
__global__ void softmax_backward_rows(const T* pd, const T* py, T* po, int64_t c, bool log) {
  __shared__ float shm[32];
  const int64_t base = int64_t(blockIdx.x) * c;
  const T* d = pd + base;
  const T* y = py + base;
  T* o = po + base;
  float s = 0.f;
  for (int64_t i = threadIdx.x; i < c; i += blockDim.x) s += log ? to_f(d[i]) : to_f(d[i]) * to_f(y[i]);
  s = block_reduce(s, SumOp{}, 0.f, shm);
  for (int64_t i = threadIdx.x; i < c; i += blockDim.x) {
    const float dv = to_f(d[i]), yv = to_f(y[i]);
    o[i] = from_f<T>(log ? dv - exp_approx(yv) * s : yv * (dv - s));
  }
}

// Row r's dlogits = k * exp(x - lse) - k * onehot(t), zeros where `zero`: the backward's kernel and
// the one-pass forward's alike.
template <typename T>
__device__ void ce_grad_row(const T* x, T* o, int64_t c, float l, float k, int32_t t, bool zero) {
  for (int64_t j = threadIdx.x; j < c; j += blockDim.x) {
    float v = 0.f;
    if (!zero) {
      v = k * exp_approx(to_f(x[j]) - l);
      if (j == t) v -= k;
    }
    o[j] = from_f<T>(v);
  }
}

// Note [fused cross-entropy] (CPU softmax.cpp): lse per row, nll = lse - x[target] (0 if ignored);
// with pg (Note [one-pass classifier] in src/ops/softmax.cpp) the gradient as the backward's
// kernel writes it, while the row is in L1/L2: one read of the logits from memory for both.
template <typename T>
__global__ void cross_entropy_rows_kernel(const T* px, const int32_t* targets, int64_t ignore_index, int64_t c,
                                          float k, float* lse, float* nll, T* pg) {
  __shared__ float shm[32];
  const int64_t r = blockIdx.x;
  const T* x = px + r * c;
  const float m = row_max(x, c, shm);
  const float s = row_sum_exp(x, c, m, shm);
  const float l = m + logf(s);
  const int32_t t = targets[r];
  if (threadIdx.x == 0) {
    lse[r] = l;
    nll[r] = t == ignore_index || t < 0 || t >= c ? 0.f : -(to_f(x[t]) - l);
  }
  if (pg) ce_grad_row(x, pg + r * c, c, l, k, t, t == ignore_index || k == 0.f);
}

// dlogits = k * exp(x - lse) - k * onehot(target); zero rows where ignored (or k == 0). One block
// per row: no 64-bit division per element (it was most of this kernel's time at GPT-2's vocabulary).
template <typename T>
__global__ void cross_entropy_backward_rows(const T* px, const float* lse, const int32_t* targets,
                                            int64_t ignore_index, float k, int64_t c, T* po) {
  const int64_t r = blockIdx.x;
  const int32_t t = targets[r];
  ce_grad_row(px + r * c, po + r * c, c, lse[r], k, t, t == ignore_index || k == 0.f);
}

}  // namespace

void softmax(const Tensor& x, bool log, Tensor& out) {
  Ctx ctx(x);
  const int64_t c = x.size(-1), rows = x.numel() / c;
  dispatch_float(x.dtype(), "softmax", [&](auto xt) {
    using T = typename decltype(xt)::type;
    dispatch_float(out.dtype(), "softmax", [&](auto ot) {
      using U = typename decltype(ot)::type;
      softmax_rows<T, U><<<unsigned(rows), row_threads(c), 0, ctx.stream>>>(ptr<const T>(x), ptr<U>(out), c, log);
    });
  });
  check_launch("softmax");
}

void softmax_backward(const Tensor& dy, const Tensor& y, bool log, Tensor& out) {
  Ctx ctx(y);
  const int64_t c = y.size(-1), rows = y.numel() / c;
  dispatch_float(y.dtype(), "softmax_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    softmax_backward_rows<T><<<unsigned(rows), row_threads(c), 0, ctx.stream>>>(ptr<const T>(dy), ptr<const T>(y),
                                                                                 ptr<T>(out), c, log);
  });
  check_launch("softmax_backward");
}

void cross_entropy_rows(const Tensor& logits, const Tensor& targets, int64_t ignore_index, float k, Tensor& lse,
                        Tensor& nll, Tensor* grad) {
  Ctx ctx(logits);
  const int64_t n = logits.size(0), c = logits.size(1);
  dispatch_float(logits.dtype(), "cross_entropy", [&](auto tag) {
    using T = typename decltype(tag)::type;
    cross_entropy_rows_kernel<T><<<unsigned(n), row_threads(c), 0, ctx.stream>>>(
        ptr<const T>(logits), ptr<const int32_t>(targets), ignore_index, c, k, ptr<float>(lse), ptr<float>(nll),
        grad ? ptr<T>(*grad) : nullptr);
  });
  check_launch("cross_entropy");
}

void cross_entropy_backward(const Tensor& logits, const Tensor& lse, const Tensor& targets, int64_t ignore_index,
                            float k, Tensor& out) {
  Ctx ctx(logits);
  const int64_t n = logits.size(0), c = logits.size(1);
  dispatch_float(logits.dtype(), "cross_entropy_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (n > 0)
      cross_entropy_backward_rows<T><<<unsigned(n), row_threads(c), 0, ctx.stream>>>(
          ptr<const T>(logits), ptr<const float>(lse), ptr<const int32_t>(targets), ignore_index, k, c, ptr<T>(out));
  });
  check_launch("cross_entropy_backward");
}

}  // namespace zt::ops::cuda
