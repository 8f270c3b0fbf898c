#pragma once
// One attention call's shapes, written once for both backends' kernels (cpu/attention.cpp on the
// host, cuda/attention*.cu on the device).
#include <cmath>
#include <cstdint>

#include "approx.h"
#include "zt/core/tensor.h"

namespace zt::ops::kern {

// A row of qkv holds H query heads, then K key heads, then K value heads of D features
// (W = (H + 2K) D wide); out rows are C = H D wide; query head h reads kv head h / G, G = H / K
// (grouped-query attention; K == H is multi-head attention, qkv [B, T, 3C]).
struct AttentionGeometry {
  int64_t B, T, C, H, K, G, D, W;
  float scale;
  bool causal;
  const int32_t* mask;  // [B, T] or null
  // CUDA only: the batches the own kernels compute (nonzero entries; null: all), where cuDNN's
  // padding mask ran the rest (Note [cudnn padding mask] in cuda/attention_cudnn.cpp).
  const int32_t* only = nullptr;
  // Columns of query head h, and of key and value head kv, in a qkv row.
  ZT_HOST_DEVICE int64_t q_col(int64_t h) const { return h * D; }
  ZT_HOST_DEVICE int64_t k_col(int64_t kv) const { return (H + kv) * D; }
  ZT_HOST_DEVICE int64_t v_col(int64_t kv) const { return (H + K + kv) * D; }
};

// qkv [B, T, W]'s geometry; `mask` is key_mask's data on its device, or null.
inline AttentionGeometry attention_geometry(const Tensor& qkv, int64_t n_head, int64_t n_kv_head, bool causal,
                                            const int32_t* mask) {
  const int64_t W = qkv.size(2), D = W / (n_head + 2 * n_kv_head);
  return AttentionGeometry{
      qkv.size(0), qkv.size(1), n_head * D, n_head, n_kv_head, n_head / n_kv_head, D, W, 1.f / std::sqrt(float(D)),
      causal,      mask,  nullptr};
}

}  // namespace zt::ops::kern
