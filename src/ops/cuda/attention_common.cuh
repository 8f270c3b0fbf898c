#pragma once
// What the CUDA attention kernels share: one call's geometry, which keys a query sees, and the
// opt-in for large shared memory (the SIMT tiles in attention.cu, the tensor-core ones in
// attention_tc.cu).
#include "../attention_geometry.h"
#include "attention_cudnn.h"
#include "common.cuh"

namespace zt::ops::cuda::attn {

// One call's shapes (the CPU's too).
using Geo = kern::AttentionGeometry;

// Whether query i of batch b sees key j.
__device__ __forceinline__ bool visible(const Geo& g, int64_t b, int64_t i, int64_t j) {
  return j < g.T && (!g.mask || g.mask[b * g.T + j] != 0) && (!g.causal || j <= i);
}

inline Geo geometry(const Tensor& qkv, int64_t n_head, int64_t n_kv_head, bool causal, const Tensor* key_mask) {
  return kern::attention_geometry(qkv, n_head, n_kv_head, causal, key_mask ? ptr<const int32_t>(*key_mask) : nullptr);
}

// Lets `kernel` use `bytes` of dynamic shared memory (over 48 KiB needs opting in); throws when
// the head is too large for the device.
template <typename K>
void allow_shared(K kernel, size_t bytes, const Geo& g, const Ctx& ctx) {
  int most = 0;
  ZT_CUDA_CHECK(cudaDeviceGetAttribute(&most, cudaDevAttrMaxSharedMemoryPerBlockOptin, ctx.device().index));
  ZT_CHECK(bytes <= size_t(most), "[attention] head size ", g.D, " needs ", bytes,
           " bytes of shared memory per block on cuda, more than the device's ", most);
  if (bytes > 48 * 1024)
    ZT_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
}

// The tensor-core kernels (attention_tc.cu) where they apply: 16-bit tensors and a head size of
// 16, 32, 64 or 128; false (nothing launched) elsewhere.
bool forward_tc(const Tensor& qkv, const Geo& g, Tensor& out, Tensor& lse, const Ctx& ctx);
bool backward_tc(const Tensor& dout, const Tensor& qkv, const Tensor& lse, const Tensor& dsum, const Geo& g,
                 Tensor& dqkv, const Ctx& ctx);

// cuDNN's fused flash attention where it applies (Note [cudnn attention]); false (nothing
// launched) elsewhere. cudnn_refusal (attention_cudnn.h) says why a call is not taken; these pass
// the Ctx's device and stream to the host-compiled attention_cudnn.cpp.
inline bool forward_cudnn(const Tensor& qkv, const Geo& g, const SeqLengths& len, Tensor& out, Tensor& lse,
                          const Ctx& ctx) {
  return forward_cudnn_on(qkv, g, len, out, lse, ctx.device(), ctx.stream);
}
inline bool backward_cudnn(const Tensor& dout, const Tensor& qkv, const Tensor& out, const Tensor& lse, const Geo& g,
                           const SeqLengths& len, Tensor& dqkv, const Ctx& ctx) {
  return backward_cudnn_on(dout, qkv, out, lse, g, len, dqkv, ctx.device(), ctx.stream);
}

// Whether the own kernels skip batch b: cuDNN's padding mask ran it (Note [cudnn padding mask]).
__device__ __forceinline__ bool skipped(const Geo& g, int64_t b) { return g.only && !g.only[b]; }

}  // namespace zt::ops::cuda::attn
