#pragma once
// What the CUDA attention kernels share: one call's geometry, which keys a query sees, and the
// opt-in for large shared memory (the SIMT tiles in attention.cu, the tensor-core ones in
// attention_tc.cu).
#include <cmath>

#include "common.cuh"

namespace zt::ops::cuda::attn {

// One call's shapes: a row of qkv holds H query heads, then K key heads, then K value heads of D
// features (W = (H + 2K) D wide); out rows are C = H D wide; query head h reads kv head h / G,
// G = H / K (grouped-query attention; K == H is multi-head attention, qkv [B, T, 3C]).
struct Geo {
  int64_t B, T, C, H, K, G, D, W;
  float scale;
  bool causal;
  const int32_t* mask;  // [B, T] or null
  // Columns of query head h, and of key and value head kv, in a qkv row.
  __host__ __device__ int64_t q_col(int64_t h) const { return h * D; }
  __host__ __device__ int64_t k_col(int64_t kv) const { return (H + kv) * D; }
  __host__ __device__ int64_t v_col(int64_t kv) const { return (H + K + kv) * D; }
};

// Whether query i of batch b sees key j.
__device__ __forceinline__ bool visible(const Geo& g, int64_t b, int64_t i, int64_t j) {
  return j < g.T && (!g.mask || g.mask[b * g.T + j] != 0) && (!g.causal || j <= i);
}

inline Geo geometry(const Tensor& qkv, int64_t n_head, int64_t n_kv_head, bool causal, const Tensor* key_mask) {
  const int64_t W = qkv.size(2), D = W / (n_head + 2 * n_kv_head);
  return Geo{qkv.size(0),
             qkv.size(1),
             n_head * D,
             n_head,
             n_kv_head,
             n_head / n_kv_head,
             D,
             W,
             1.f / std::sqrt(float(D)),
             causal,
             key_mask ? ptr<const int32_t>(*key_mask) : nullptr};
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

}  // namespace zt::ops::cuda::attn
