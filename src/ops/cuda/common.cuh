#pragma once
// Helpers shared by the CUDA kernels (private to ops/cuda): error checks, the device's stream,
// dtype dispatch, f32/bf16/f16 loads and stores, block reductions, the CPU's exp and tanh.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>
#include <type_traits>

#include "../approx.h"
#include "kernels.h"
#include "zt/core/device.h"
#include "zt/core/error.h"
#include "zt/core/tensor.h"

namespace zt::ops::cuda {

// A library's plans (cuBLASLt layouts and algorithms, cuDNN descriptors) by their problem's key:
// made once, never moved or destroyed (a handful per model; used during static teardown too).
template <typename Plan>
struct PlanCache {
  struct KeyHash {
    size_t operator()(const std::vector<int64_t>& k) const {
      size_t h = 0xcbf29ce484222325ull;  // FNV-1a over the key's values
      for (int64_t v : k) h = (h ^ size_t(v)) * 0x100000001b3ull;
      return h;
    }
  };
  std::mutex mu;
  std::unordered_map<std::vector<int64_t>, std::unique_ptr<Plan>, KeyHash> plans;
  static PlanCache& get() {
    static auto* c = new PlanCache();
    return *c;
  }
};

inline void cuda_check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) ZT_THROW_AS(ErrorKind::internal, "[cuda] ", what, ": ", cudaGetErrorString(e));
}
#define ZT_CUDA_CHECK(expr) ::zt::ops::cuda::cuda_check((expr), #expr)

// A launch's own errors (bad configuration) show at once; faults inside it show at a later call.
inline void check_launch(const char* op) { cuda_check(cudaGetLastError(), op); }

// Makes t's GPU current for the kernel's lifetime (launches go to the current device) and
// holds its compute stream (Note [device streams]).
class Ctx {
 public:
  explicit Ctx(const Tensor& t) : device_(t.device()) {
    ZT_CUDA_CHECK(cudaGetDevice(&previous_));
    if (previous_ != device_.index) ZT_CUDA_CHECK(cudaSetDevice(device_.index));
    stream = static_cast<cudaStream_t>(zt::device_stream(device_));
  }
  ~Ctx() {
    if (previous_ != device_.index) (void)cudaSetDevice(previous_);
  }
  Ctx(const Ctx&) = delete;
  Ctx& operator=(const Ctx&) = delete;
  Device device() const { return device_; }
  cudaStream_t stream = nullptr;

 private:
  Device device_;
  int previous_ = 0;
};

// Temporary device memory from the caching allocator, tagged workspace.
inline Tensor workspace(const Shape& shape, DType dt, Device d) { return Tensor::empty(shape, dt, MemTag::workspace, d); }

// Threads that fill the device twice over (every SM at full occupancy, two waves): what the
// column sums of bias and norm gradients split their rows to reach. Read once per device.
inline int64_t filling_threads(const Ctx& ctx) {
  static std::atomic<int64_t> cached[64] = {};
  const int d = ctx.device().index;
  int64_t n = d < 64 ? cached[d].load() : 0;
  if (n == 0) {
    int sms = 0, per_sm = 0;
    ZT_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, d));
    ZT_CUDA_CHECK(cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxThreadsPerMultiProcessor, d));
    n = 2 * int64_t(sms) * per_sm;
    if (d < 64) cached[d] = n;
  }
  return n;
}

// Waits for this stream's work (the kernels that return a host value).
inline void sync(cudaStream_t s) { ZT_CUDA_CHECK(cudaStreamSynchronize(s)); }

// ---- dtypes: float, __nv_bfloat16, __half stand for f32, bf16, f16 on the device ----
template <typename T>
struct Type {
  using type = T;
};

// Calls fn(Type<T>{}) with T = float, __nv_bfloat16 or __half for dt.
template <typename Fn>
decltype(auto) dispatch_float(DType dt, const char* op, Fn&& fn) {
  switch (dt) {
    case DType::f32:
      return fn(Type<float>{});
    case DType::bf16:
      return fn(Type<__nv_bfloat16>{});
    case DType::f16:
      return fn(Type<__half>{});
    default:
      break;
  }
  ZT_THROW("[", op, "] dtype ", dtype_name(dt), " is not supported on cuda (allowed: f32, bf16, f16)");
}

template <typename T>
T* ptr(const Tensor& t) {
  return static_cast<T*>(t.raw_data());
}

__device__ __forceinline__ float to_f(float v) { return v; }
__device__ __forceinline__ float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float to_f(__half v) { return __half2float(v); }

// Rounds to nearest even, as core's float_to_bf16 / float_to_f16 (NaN payloads may differ).
template <typename T>
__device__ __forceinline__ T from_f(float v) {
  if constexpr (std::is_same_v<T, float>)
    return v;
  else if constexpr (std::is_same_v<T, __nv_bfloat16>)
    return __float2bfloat16_rn(v);
  else
    return __float2half_rn(v);
}

// ---- launch shapes ----
constexpr int kThreads = 256;

// Blocks for a grid-stride loop over n items (capped: each thread then takes several).
inline unsigned blocks_for(int64_t n, int threads = kThreads) {
  return unsigned(std::clamp<int64_t>((n + threads - 1) / threads, 1, 65535 * 8));
}

// Threads for one block per row of c values: a power of two in [32, 1024], about 8 values each.
inline int row_threads(int64_t c) {
  int t = 32;
  while (t < 1024 && int64_t(t) * 8 < c) t *= 2;
  return t;
}

// ---- the norms' fused residual (both ways) ----
// Row r of a norm's input: x's, or x + residual rounded to T and written to sum's row first (as
// ops::add makes it). Each thread later reads back only the columns it wrote, so no barrier.
template <typename T>
__device__ __forceinline__ const T* norm_input_row(const T* px, const T* pres, T* psum, int64_t r, int64_t c) {
  if (!pres) return px + r * c;
  for (int64_t i = threadIdx.x; i < c; i += blockDim.x)
    psum[r * c + i] = from_f<T>(to_f(px[r * c + i]) + to_f(pres[r * c + i]));
  return psum + r * c;
}
// A norm's dx value into *o: written, or added to the residual's gradient there (rounded once).
template <typename T>
__device__ __forceinline__ void store_dx(T* o, float v, bool accumulate) {
  *o = from_f<T>(accumulate ? to_f(*o) + v : v);
}

__device__ __forceinline__ int64_t global_index() { return int64_t(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ __forceinline__ int64_t grid_stride() { return int64_t(gridDim.x) * blockDim.x; }

// ---- reductions within a warp and a block (blockDim.x a multiple of 32) ----
struct SumOp {
  template <typename T>
  __device__ __forceinline__ T operator()(T a, T b) const {
    return a + b;
  }
};
struct MaxOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

template <typename T, typename Op>
__device__ __forceinline__ T warp_reduce(T v, Op op) {
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// The block's reduction of v, returned to every thread; shm holds 32 values. The leading
// barrier lets a kernel call it repeatedly with the same shm.
template <typename T, typename Op>
__device__ __forceinline__ T block_reduce(T v, Op op, T identity, T* shm) {
  v = warp_reduce(v, op);
  const int lane = int(threadIdx.x) & 31, warp = int(threadIdx.x) >> 5;
  __syncthreads();
  if (lane == 0) shm[warp] = v;
  __syncthreads();
  v = lane < int(blockDim.x >> 5) ? shm[lane] : identity;
  return warp_reduce(v, op);
}

// ---- a deterministic two-stage sum of f(i) over [0, n) in double, returned to the host ----
constexpr int kSumBlocks = 1024;

template <typename F>
__global__ void partial_sums(F f, int64_t n, double* part) {
  __shared__ double shm[32];
  double s = 0.0;
  for (int64_t i = global_index(); i < n; i += grid_stride()) s += f(i);
  s = block_reduce(s, SumOp{}, 0.0, shm);
  if (threadIdx.x == 0) part[blockIdx.x] = s;
}

// Column sums of [rows, c] partials in row-block order, rounded once: part [nb, c] f32 -> out [c]
// (the second stage of gelu_bias_backward's and rms_norm_backward's atomic-free sums).
template <typename T>
__global__ void column_total(const float* part, int64_t nb, int64_t c, T* out) {
  for (int64_t j = global_index(); j < c; j += grid_stride()) {
    float s = 0.f;
    for (int64_t b = 0; b < nb; ++b) s += part[b * c + j];
    out[j] = from_f<T>(s);
  }
}

// One block: part[0..nb) summed into part[nb] (a template, so each file gets its own copy).
template <typename T>
__global__ void final_sum(T* part, int nb) {
  __shared__ T shm[32];
  T s = T(0);
  for (int i = int(threadIdx.x); i < nb; i += int(blockDim.x)) s += part[i];
  s = block_reduce(s, SumOp{}, T(0), shm);
  if (threadIdx.x == 0) part[nb] = s;
}

// Queues the sum of f(i) over [0, n) into *dst, a double on the device (the workspace is freed
// at once: later work on this stream reuses it only after these kernels).
template <typename F>
void device_sum_to(const Ctx& ctx, F f, int64_t n, double* dst) {
  const int nb = int(std::min<unsigned>(blocks_for(n), kSumBlocks));
  Tensor part = workspace({nb + 1}, DType::i64, ctx.device());  // doubles in an i64 buffer (same size)
  double* p = ptr<double>(part);
  partial_sums<<<unsigned(nb), kThreads, 0, ctx.stream>>>(f, n, p);
  check_launch("device_sum");
  final_sum<double><<<1, kThreads, 0, ctx.stream>>>(p, nb);
  check_launch("device_sum");
  ZT_CUDA_CHECK(cudaMemcpyAsync(dst, p + nb, sizeof(double), cudaMemcpyDeviceToDevice, ctx.stream));
}

template <typename F>
double device_sum(const Ctx& ctx, F f, int64_t n) {
  Tensor one = workspace({1}, DType::i64, ctx.device());
  device_sum_to(ctx, f, n, ptr<double>(one));
  double total = 0.0;
  ZT_CUDA_CHECK(cudaMemcpyAsync(&total, ptr<double>(one), sizeof total, cudaMemcpyDeviceToHost, ctx.stream));
  sync(ctx.stream);
  return total;
}

using approx::exp_approx;  // the CPU's operations (approx.h), so results agree closely
using approx::tanh_approx;
using approx::gelu_erf;
using approx::gelu_erf_grad;
using approx::gelu_tanh;
using approx::gelu_tanh_grad;

// t's values as an f32 tensor: t itself when f32, else a converted workspace copy (stream-ordered).
inline Tensor f32_copy(const Tensor& t) {
  if (t.dtype() == DType::f32) return t;
  Tensor w = workspace(t.shape(), DType::f32, t.device());
  cast(t, w);
  return w;
}

}  // namespace zt::ops::cuda
