// CUDA convolutions (cuDNN 9's legacy API, NCHW, f32 compute; algorithms and descriptors cached
// per geometry) with bias and bias-gradient kernels, and max pooling with its argmax, both ways.
#include <memory>
#include <mutex>
#include <vector>

#include "common.cuh"
#include "cudnn_common.h"

namespace zt::ops::cuda {

namespace {

enum Dir { kForward = 0, kBackwardData = 1, kBackwardFilter = 2 };

// One direction's convolution descriptor (its own math type), algorithm and workspace bytes.
struct Direction {
  cudnnConvolutionDescriptor_t conv = nullptr;
  int algo = 0;
  size_t ws = 0;
  bool ready = false;
};

// Descriptors of one (device, dtype, geometry); never destroyed (a handful per model).
struct Plan {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  Direction dir[3];
};

// The fastest result cuDNN ranks usable: f32 only with FMA math (TF32 would change the results),
// deterministic ones first where asked (backward). Null when none.
template <typename Perf>
const Perf* pick(const Perf* r, int n, bool f32, bool deterministic) {
  for (int pass = deterministic ? 0 : 1; pass < 2; ++pass)
    for (int i = 0; i < n; ++i)
      if (r[i].status == CUDNN_STATUS_SUCCESS && (!f32 || r[i].mathType == CUDNN_FMA_MATH) &&
          (pass == 1 || r[i].determinism == CUDNN_DETERMINISTIC))
        return &r[i];
  return nullptr;
}

// Chooses direction d's algorithm (cuDNN's heuristics, _v7) and its workspace size.
void prepare(Plan& p, Dir d, cudnnHandle_t h, const ConvGeometry& g, bool f32) {
  Direction& dr = p.dir[d];
  ZT_DNN_CHECK(cudnnCreateConvolutionDescriptor(&dr.conv));
  ZT_DNN_CHECK(cudnnSetConvolution2dDescriptor(dr.conv, int(g.pad), int(g.pad), int(g.stride), int(g.stride), 1, 1,
                                               CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  const cudnnMathType_t want = f32 ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH;
  ZT_DNN_CHECK(cudnnSetConvolutionMathType(dr.conv, want));
  int n = 0;
  cudnnMathType_t math = want;
  if (d == kForward) {
    cudnnConvolutionFwdAlgoPerf_t r[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    ZT_DNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(h, p.x, p.w, dr.conv, p.y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
                                                        &n, r));
    const auto* best = pick(r, n, f32, false);
    dr.algo = best ? int(best->algo) : int(CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM);
    if (best) math = best->mathType;
    ZT_DNN_CHECK(cudnnSetConvolutionMathType(dr.conv, math));
    ZT_DNN_CHECK(cudnnGetConvolutionForwardWorkspaceSize(h, p.x, p.w, dr.conv, p.y,
                                                         cudnnConvolutionFwdAlgo_t(dr.algo), &dr.ws));
  } else if (d == kBackwardData) {
    cudnnConvolutionBwdDataAlgoPerf_t r[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    ZT_DNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(h, p.w, p.y, dr.conv, p.x,
                                                             CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &n, r));
    const auto* best = pick(r, n, f32, true);
    dr.algo = best ? int(best->algo) : int(CUDNN_CONVOLUTION_BWD_DATA_ALGO_1);
    if (best) math = best->mathType;
    ZT_DNN_CHECK(cudnnSetConvolutionMathType(dr.conv, math));
    ZT_DNN_CHECK(cudnnGetConvolutionBackwardDataWorkspaceSize(h, p.w, p.y, dr.conv, p.x,
                                                              cudnnConvolutionBwdDataAlgo_t(dr.algo), &dr.ws));
  } else {
    cudnnConvolutionBwdFilterAlgoPerf_t r[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    ZT_DNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, p.x, p.y, dr.conv, p.w,
                                                               CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &n, r));
    const auto* best = pick(r, n, f32, true);
    dr.algo = best ? int(best->algo) : int(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1);
    if (best) math = best->mathType;
    ZT_DNN_CHECK(cudnnSetConvolutionMathType(dr.conv, math));
    ZT_DNN_CHECK(cudnnGetConvolutionBackwardFilterWorkspaceSize(h, p.x, p.y, dr.conv, p.w,
                                                                cudnnConvolutionBwdFilterAlgo_t(dr.algo), &dr.ws));
  }
  dr.ready = true;
}

// The plan of (device, dtype, geometry) with direction d prepared; the handle gets the stream.
struct Call {
  cudnnHandle_t h;
  const Plan* plan;
  const Direction* dir;
};
Call setup(const Ctx& ctx, DType dt, const ConvGeometry& g, Dir d) {
  const cudnnHandle_t h = handle_for(ctx.device().index);
  ZT_DNN_CHECK(cudnnSetStream(h, ctx.stream));
  const std::vector<int64_t> key{ctx.device().index, int64_t(dt), g.n, g.cin, g.h, g.w, g.cout, g.kh, g.kw,
                                 g.stride,           g.pad};
  PlanCache<Plan>& c = PlanCache<Plan>::get();
  std::lock_guard<std::mutex> lock(c.mu);
  std::unique_ptr<Plan>& p = c.plans[key];
  if (!p) {
    auto fresh = std::make_unique<Plan>();
    const cudnnDataType_t t = dnn_type(dt);
    ZT_DNN_CHECK(cudnnCreateTensorDescriptor(&fresh->x));
    ZT_DNN_CHECK(cudnnSetTensor4dDescriptor(fresh->x, CUDNN_TENSOR_NCHW, t, int(g.n), int(g.cin), int(g.h), int(g.w)));
    ZT_DNN_CHECK(cudnnCreateTensorDescriptor(&fresh->y));
    ZT_DNN_CHECK(
        cudnnSetTensor4dDescriptor(fresh->y, CUDNN_TENSOR_NCHW, t, int(g.n), int(g.cout), int(g.ho), int(g.wo)));
    ZT_DNN_CHECK(cudnnCreateFilterDescriptor(&fresh->w));
    ZT_DNN_CHECK(
        cudnnSetFilter4dDescriptor(fresh->w, t, CUDNN_TENSOR_NCHW, int(g.cout), int(g.cin), int(g.kh), int(g.kw)));
    p = std::move(fresh);
  }
  if (!p->dir[d].ready) prepare(*p, d, h, g, dt == DType::f32);
  return {h, p.get(), &p->dir[d]};
}

// The algorithm's scratch memory (null when none); the Tensor holding it is freed after the
// call is enqueued, which is safe because the stream orders any reuse after it.
Tensor scratch(const Direction& d, Device dev) {
  return d.ws ? workspace({int64_t((d.ws + 3) / 4)}, DType::f32, dev) : Tensor();
}
void* scratch_ptr(const Tensor& t) { return t.defined() ? t.raw_data() : nullptr; }

// y[n, c, :, :] += b[c], in f32 with one more rounding for 16-bit y.
template <typename T>
__global__ void add_channel_bias(T* y, const T* b, int64_t total, int64_t hw, int64_t c) {
  for (int64_t e = global_index(); e < total; e += grid_stride()) y[e] = from_f<T>(to_f(y[e]) + to_f(b[(e / hw) % c]));
}

// db[c] = sum over n and the plane of dy, in f32, one block per channel (no atomics).
template <typename T>
__global__ void channel_sums(const T* dy, T* db, int64_t n, int64_t c, int64_t hw) {
  __shared__ float shm[32];
  const int64_t ch = blockIdx.x;
  float s = 0.f;
  for (int64_t i = threadIdx.x; i < n * hw; i += blockDim.x) s += to_f(dy[((i / hw) * c + ch) * hw + i % hw]);
  s = block_reduce(s, SumOp{}, 0.f, shm);
  if (threadIdx.x == 0) db[ch] = from_f<T>(s);
}

// As the CPU's pool.cpp: the first maximum in scan order wins, and so does a NaN.
__device__ __forceinline__ bool better(float v, float best) { return v > best || v != v; }

// One thread per output: its k x k window scanned row by row; argmax is the index in the plane.
template <typename T>
__global__ void max_pool_kernel(const T* x, T* y, int32_t* am, int64_t total, int64_t h, int64_t w, int64_t k,
                                int64_t s, int64_t ho, int64_t wo) {
  for (int64_t e = global_index(); e < total; e += grid_stride()) {
    const int64_t p = e / (ho * wo), o = e % (ho * wo), oy = o / wo, ox = o % wo;
    const T* plane = x + p * h * w;
    int64_t best = oy * s * w + ox * s;
    float bv = to_f(plane[best]);
    for (int64_t ky = 0; ky < k; ++ky)
      for (int64_t kx = 0; kx < k; ++kx) {
        const int64_t i = (oy * s + ky) * w + ox * s + kx;
        const float v = to_f(plane[i]);
        if (better(v, bv)) {
          bv = v;
          best = i;
        }
      }
    y[e] = plane[best];
    am[e] = int32_t(best);
  }
}

// acc[plane, argmax] += dy (f32 atomics: overlapping windows add up; their order varies).
template <typename T>
__global__ void max_pool_backward_kernel(const T* dy, const int32_t* am, float* acc, int64_t total, int64_t out,
                                         int64_t hw) {
  for (int64_t e = global_index(); e < total; e += grid_stride()) {
    const int32_t i = am[e];
    if (i >= 0 && i < hw) atomicAdd(acc + (e / out) * hw + i, to_f(dy[e]));
  }
}

}  // namespace

void conv2d(const Tensor& x, const Tensor& w, const Tensor* b, const ConvGeometry& g, Tensor& y) {
  Ctx ctx(x);
  const Call c = setup(ctx, x.dtype(), g, kForward);
  const Tensor ws = scratch(*c.dir, ctx.device());
  const float alpha = 1.f, beta = 0.f;
  ZT_DNN_CHECK(cudnnConvolutionForward(c.h, &alpha, c.plan->x, x.raw_data(), c.plan->w, w.raw_data(), c.dir->conv,
                                       cudnnConvolutionFwdAlgo_t(c.dir->algo), scratch_ptr(ws), c.dir->ws, &beta,
                                       c.plan->y, y.raw_data()));
  if (!b) return;
  const int64_t total = y.numel();
  dispatch_float(y.dtype(), "conv2d", [&](auto tag) {
    using T = typename decltype(tag)::type;
    add_channel_bias<T><<<blocks_for(total), kThreads, 0, ctx.stream>>>(ptr<T>(y), ptr<const T>(*b), total,
                                                                         g.ho * g.wo, g.cout);
  });
  check_launch("conv2d");
}

void conv2d_backward_data(const Tensor& dy, const Tensor& w, const ConvGeometry& g, Tensor& dx) {
  Ctx ctx(dy);
  const Call c = setup(ctx, dy.dtype(), g, kBackwardData);
  const Tensor ws = scratch(*c.dir, ctx.device());
  const float alpha = 1.f, beta = 0.f;
  ZT_DNN_CHECK(cudnnConvolutionBackwardData(c.h, &alpha, c.plan->w, w.raw_data(), c.plan->y, dy.raw_data(),
                                            c.dir->conv, cudnnConvolutionBwdDataAlgo_t(c.dir->algo), scratch_ptr(ws),
                                            c.dir->ws, &beta, c.plan->x, dx.raw_data()));
}

void conv2d_backward_weights(const Tensor& dy, const Tensor& x, const ConvGeometry& g, Tensor& dw, Tensor* db) {
  Ctx ctx(dy);
  const Call c = setup(ctx, dy.dtype(), g, kBackwardFilter);
  const Tensor ws = scratch(*c.dir, ctx.device());
  const float alpha = 1.f, beta = 0.f;
  ZT_DNN_CHECK(cudnnConvolutionBackwardFilter(c.h, &alpha, c.plan->x, x.raw_data(), c.plan->y, dy.raw_data(),
                                              c.dir->conv, cudnnConvolutionBwdFilterAlgo_t(c.dir->algo),
                                              scratch_ptr(ws), c.dir->ws, &beta, c.plan->w, dw.raw_data()));
  if (!db) return;
  dispatch_float(dy.dtype(), "conv2d_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    channel_sums<T><<<unsigned(g.cout), kThreads, 0, ctx.stream>>>(ptr<const T>(dy), ptr<T>(*db), g.n, g.cout,
                                                                   g.ho * g.wo);
  });
  check_launch("conv2d_backward");
}

void max_pool2d(const Tensor& x, int64_t k, int64_t s, Tensor& y, Tensor& argmax) {
  Ctx ctx(x);
  const int64_t h = x.size(2), w = x.size(3), ho = y.size(2), wo = y.size(3), total = y.numel();
  dispatch_float(x.dtype(), "max_pool2d", [&](auto tag) {
    using T = typename decltype(tag)::type;
    max_pool_kernel<T><<<blocks_for(total), kThreads, 0, ctx.stream>>>(ptr<const T>(x), ptr<T>(y),
                                                                        ptr<int32_t>(argmax), total, h, w, k, s, ho, wo);
  });
  check_launch("max_pool2d");
}

void max_pool2d_backward(const Tensor& dy, const Tensor& argmax, Tensor& dx) {
  Ctx ctx(dy);
  const int64_t hw = dx.size(2) * dx.size(3), out = dy.size(2) * dy.size(3), total = dy.numel();
  // f32 sums go straight into an f32 dx, else into a workspace cast once at the end (freed
  // after enqueueing: the stream orders any reuse of this memory after these kernels).
  Tensor acc = dx.dtype() == DType::f32 ? dx : workspace(dx.shape(), DType::f32, dx.device());
  ZT_CUDA_CHECK(cudaMemsetAsync(acc.raw_data(), 0, acc.nbytes(), ctx.stream));
  dispatch_float(dy.dtype(), "max_pool2d_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    max_pool_backward_kernel<T><<<blocks_for(total), kThreads, 0, ctx.stream>>>(
        ptr<const T>(dy), ptr<const int32_t>(argmax), ptr<float>(acc), total, out, hw);
  });
  check_launch("max_pool2d_backward");
  if (!acc.same(dx)) cast(acc, dx);
}

}  // namespace zt::ops::cuda
