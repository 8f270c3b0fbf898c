// CUDA whole-buffer precision kernels: casts, in-place scaling and accumulation (f32 math, one
// rounding), the squared norm in double and the inf/NaN check, the last two back on the host.
#include "common.cuh"

namespace zt::ops::cuda {

namespace {

template <typename S, typename D>
__global__ void cast_kernel(const S* s, D* d, int64_t n) {
  for (int64_t i = global_index(); i < n; i += grid_stride()) d[i] = from_f<D>(to_f(s[i]));
}

template <typename T>
__global__ void scale_kernel(T* x, float s, int64_t n) {
  for (int64_t i = global_index(); i < n; i += grid_stride()) x[i] = from_f<T>(to_f(x[i]) * s);
}

// dst = dst + alpha * src, unfused as on the CPU.
template <typename D, typename S>
__global__ void axpy_kernel(D* d, float alpha, const S* s, int64_t n) {
  for (int64_t i = global_index(); i < n; i += grid_stride())
    d[i] = from_f<D>(__fadd_rn(to_f(d[i]), __fmul_rn(alpha, to_f(s[i]))));
}

template <typename T>
struct SquareOf {
  const T* p;
  __device__ double operator()(int64_t i) const {
    const double v = double(to_f(p[i]));
    return v * v;
  }
};

// Raw bits with an all-ones exponent are inf or NaN; any thread that sees one sets the flag.
template <typename T>
__global__ void nonfinite_kernel(const T* p, int64_t n, int32_t* flag) {
  bool any = false;
  for (int64_t i = global_index(); i < n; i += grid_stride()) {
    if constexpr (std::is_same_v<T, float>) {
      any |= (__float_as_uint(p[i]) & 0x7f800000u) == 0x7f800000u;
    } else {
      constexpr unsigned short mask = std::is_same_v<T, __nv_bfloat16> ? 0x7f80u : 0x7c00u;
      const unsigned short bits = *reinterpret_cast<const unsigned short*>(p + i);
      any |= (bits & mask) == mask;
    }
  }
  if (__any_sync(0xffffffffu, any) && (threadIdx.x & 31) == 0) *flag = 1;
}

}  // namespace

void cast(const Tensor& src, Tensor& dst) {
  Ctx ctx(dst);
  const int64_t n = src.numel();
  if (src.dtype() == dst.dtype()) {
    ZT_CUDA_CHECK(cudaMemcpyAsync(dst.raw_data(), src.raw_data(), src.nbytes(), cudaMemcpyDeviceToDevice, ctx.stream));
    return;
  }
  dispatch_float(src.dtype(), "cast", [&](auto s_tag) {
    using S = typename decltype(s_tag)::type;
    dispatch_float(dst.dtype(), "cast", [&](auto d_tag) {
      using D = typename decltype(d_tag)::type;
      cast_kernel<S, D><<<blocks_for(n), kThreads, 0, ctx.stream>>>(ptr<const S>(src), ptr<D>(dst), n);
    });
  });
  check_launch("cast");
}

void scale_(Tensor& x, float s) {
  Ctx ctx(x);
  const int64_t n = x.numel();
  dispatch_float(x.dtype(), "scale_", [&](auto tag) {
    using T = typename decltype(tag)::type;
    scale_kernel<T><<<blocks_for(n), kThreads, 0, ctx.stream>>>(ptr<T>(x), s, n);
  });
  check_launch("scale_");
}

void axpy_(Tensor& dst, float alpha, const Tensor& src) {
  Ctx ctx(dst);
  const int64_t n = dst.numel();
  dispatch_float(dst.dtype(), "axpy_", [&](auto d_tag) {
    using D = typename decltype(d_tag)::type;
    dispatch_float(src.dtype(), "axpy_", [&](auto s_tag) {
      using S = typename decltype(s_tag)::type;
      axpy_kernel<D, S><<<blocks_for(n), kThreads, 0, ctx.stream>>>(ptr<D>(dst), alpha, ptr<const S>(src), n);
    });
  });
  check_launch("axpy_");
}

double sum_of_squares(const Tensor& x) {
  const int64_t n = x.numel();
  if (n == 0) return 0.0;
  Ctx ctx(x);
  return dispatch_float(x.dtype(), "sum_of_squares", [&](auto tag) {
    using T = typename decltype(tag)::type;
    return device_sum(ctx, SquareOf<T>{ptr<const T>(x)}, n);
  });
}

void sum_of_squares_to(const Tensor& x, Tensor& out, int64_t slot) {
  Ctx ctx(x);
  double* dst = ptr<double>(out) + slot;
  if (x.numel() == 0) {
    ZT_CUDA_CHECK(cudaMemsetAsync(dst, 0, sizeof(double), ctx.stream));
    return;
  }
  dispatch_float(x.dtype(), "sum_of_squares_to", [&](auto tag) {
    using T = typename decltype(tag)::type;
    device_sum_to(ctx, SquareOf<T>{ptr<const T>(x)}, x.numel(), dst);
  });
}

bool has_nonfinite(const Tensor& x) {
  const int64_t n = x.numel();
  if (n == 0) return false;
  Ctx ctx(x);
  // Freed after the synchronisation below.
  Tensor flag = workspace({1}, DType::i32, x.device());
  ZT_CUDA_CHECK(cudaMemsetAsync(flag.raw_data(), 0, sizeof(int32_t), ctx.stream));
  dispatch_float(x.dtype(), "has_nonfinite", [&](auto tag) {
    using T = typename decltype(tag)::type;
    nonfinite_kernel<T><<<blocks_for(n), kThreads, 0, ctx.stream>>>(ptr<const T>(x), n, ptr<int32_t>(flag));
  });
  check_launch("has_nonfinite");
  int32_t found = 0;
  ZT_CUDA_CHECK(cudaMemcpyAsync(&found, flag.raw_data(), sizeof found, cudaMemcpyDeviceToHost, ctx.stream));
  sync(ctx.stream);
  return found != 0;
}

}  // namespace zt::ops::cuda
