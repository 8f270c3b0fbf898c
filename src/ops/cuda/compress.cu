// CUDA kernels of ZeRO++'s wire formats (Note [block quantization] and the sparse rows' sum in
// zt/ops/compress.h): one thread block per quantization block, the CPU's float operations in
// the CPU's order (rintf is the CPU's round-to-nearest-even), so packets agree bit for bit.
#include "common.cuh"
#include "zt/ops/compress.h"

namespace zt::ops::cuda {

namespace {

static_assert(kQuantBlock == kThreads, "one thread per value of a quantization block");

int64_t blocks_of(int64_t n) { return (n + kQuantBlock - 1) / kQuantBlock; }

template <typename T>
__global__ void quantize_kernel(const T* x, int64_t n, int bits, float* scales, uint8_t* codes) {
  __shared__ float shm[32];
  __shared__ int8_t c[kQuantBlock];
  const int64_t blk = blockIdx.x, begin = blk * kQuantBlock;
  const int64_t len = n - begin < kQuantBlock ? n - begin : kQuantBlock;
  const int i = int(threadIdx.x);
  const float v = i < len ? to_f(x[begin + i]) : 0.f;
  const bool finite = !__syncthreads_or(!isfinite(v));
  const float amax = block_reduce(fabsf(v), MaxOp{}, 0.f, shm);  // fmaxf drops NaN, as std::max
  const float q = bits == 4 ? 7.f : 127.f;
  if (i == 0) scales[blk] = finite ? __fdiv_rn(amax, q) : NAN;
  float inv = finite && amax > 0 ? __fdiv_rn(q, amax) : 0.f;
  if (!isfinite(inv)) inv = 0.f;
  const int8_t code = int8_t(int(rintf(finite ? __fmul_rn(v, inv) : 0.f)));
  if (bits == 8) {
    if (i < len) codes[begin + i] = uint8_t(code);
    return;
  }
  c[i] = code;
  __syncthreads();
  if (i % 2 == 0 && i < len)  // blocks hold an even count of values: each starts on a whole byte
    codes[begin / 2 + i / 2] = uint8_t((c[i] & 0xF) | (i + 1 < len ? (c[i + 1] & 0xF) << 4 : 0));
}

__device__ __forceinline__ float code_value(const uint8_t* codes, int64_t i, int bits, float scale) {
  int code;
  if (bits == 8) {
    code = int(int8_t(codes[i]));
  } else {
    const int nib = (i & 1) ? codes[i / 2] >> 4 : codes[i / 2] & 0xF;
    code = nib - ((nib & 8) << 1);  // sign-extended
  }
  return __fmul_rn(float(code), scale);
}

template <typename T>
__global__ void dequantize_kernel(const float* scales, const uint8_t* codes, int64_t n, int bits, bool accumulate,
                                  T* out) {
  for (int64_t i = global_index(); i < n; i += grid_stride()) {
    const float v = code_value(codes, i, bits, scales[i / kQuantBlock]);
    if constexpr (std::is_same_v<T, float>)
      out[i] = accumulate ? __fadd_rn(out[i], v) : v;
    else
      out[i] = from_f<T>(v);
  }
}

// One thread per column: it owns every position of that column, so each sums its rows in the
// ids' order (rank order) with no atomics. Ids outside [0, V) are skipped (the CPU's throws).
__global__ void average_rows_kernel(const int32_t* ids, int64_t k, const float* rows, int64_t offset, int64_t V,
                                    int64_t C, int64_t dst_begin, int64_t len, float* out) {
  for (int64_t c = global_index(); c < C; c += grid_stride())
    for (int64_t i = 0; i < k; ++i) {
      if (ids[i] < 0 || ids[i] >= V) continue;
      const int64_t x = offset + ids[i] * C + c - dst_begin;
      if (x >= 0 && x < len) out[x] = __fadd_rn(out[x], rows[i * C + c]);
    }
}

__global__ void divide_kernel(float* out, int64_t n, float divisor) {
  for (int64_t i = global_index(); i < n; i += grid_stride()) out[i] = __fdiv_rn(out[i], divisor);
}

}  // namespace

void quantize_blocks(const Tensor& x, int bits, Tensor& packet) {
  Ctx ctx(x);
  const int64_t n = x.numel(), nb = blocks_of(n);
  auto* scales = ptr<float>(packet);
  auto* codes = reinterpret_cast<uint8_t*>(scales + nb);
  ZT_CUDA_CHECK(cudaMemsetAsync(codes, 0, size_t(packet.nbytes()) - size_t(nb) * 4, ctx.stream));
  if (n == 0) return;
  dispatch_float(x.dtype(), "quantize", [&](auto t) {
    using T = typename decltype(t)::type;
    quantize_kernel<T><<<unsigned(nb), kThreads, 0, ctx.stream>>>(ptr<const T>(x), n, bits, scales, codes);
  });
  check_launch("quantize");
}

void dequantize_blocks(const Tensor& packet, int bits, bool accumulate, Tensor& out) {
  Ctx ctx(out);
  const int64_t n = out.numel();
  if (n == 0) return;
  const auto* scales = ptr<const float>(packet);
  const auto* codes = reinterpret_cast<const uint8_t*>(scales + blocks_of(n));
  dispatch_float(out.dtype(), "dequantize", [&](auto t) {
    using T = typename decltype(t)::type;
    dequantize_kernel<T><<<blocks_for(n), kThreads, 0, ctx.stream>>>(scales, codes, n, bits, accumulate, ptr<T>(out));
  });
  check_launch("dequantize");
}

void average_rows(const Tensor& ids, const Tensor& rows, int64_t offset, int64_t V, int64_t C, int64_t dst_begin,
                  float divisor, Tensor& out) {
  Ctx ctx(out);
  const int64_t len = out.numel();
  ZT_CUDA_CHECK(cudaMemsetAsync(out.raw_data(), 0, size_t(len) * 4, ctx.stream));
  if (len == 0) return;
  if (ids.numel() > 0) {
    average_rows_kernel<<<blocks_for(C), kThreads, 0, ctx.stream>>>(ptr<const int32_t>(ids), ids.numel(),
                                                                     ptr<const float>(rows), offset, V, C, dst_begin,
                                                                     len, ptr<float>(out));
    check_launch("average_rows");
  }
  divide_kernel<<<blocks_for(len), kThreads, 0, ctx.stream>>>(ptr<float>(out), len, divisor);
  check_launch("average_rows");
}

// The dense composition, as the sparse rows were reduced before add_average_rows existed: a
// GPU's bandwidth makes the buffer's size cheap, and the sums keep average_rows' order.
void add_average_rows(const Tensor& ids, const Tensor& rows, int64_t offset, int64_t V, int64_t C, int64_t dst_begin,
                      float divisor, DType wire, Tensor& dst) {
  Tensor acc = workspace({dst.numel()}, DType::f32, dst.device());
  average_rows(ids, rows, offset, V, C, dst_begin, divisor, acc);
  Tensor sent = acc;
  if (wire != DType::f32) {
    sent = workspace({dst.numel()}, wire, dst.device());
    cast(acc, sent);
  }
  axpy_(dst, 1.f, sent);
}

}  // namespace zt::ops::cuda
