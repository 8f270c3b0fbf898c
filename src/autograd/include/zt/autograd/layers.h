#pragma once
// Differentiable layer ops (embedding, layer norm, dropout, attention, convolution, pooling):
// each calls its kernel in zt/ops/{transformer,conv}.h and records the matching backward.
#include <cstdint>

#include "zt/core/tensor.h"

namespace zt::ops {
struct RopeTables;  // zt/ops/transformer.h
}

namespace zt::ag {

// weight [V, C], ids [...] i32 -> [..., C]. When the weight was marked with
// autograd::set_sparse_grad, backward also adds the rows it touched to its touched_rows().
Tensor embedding(const Tensor& weight, const Tensor& ids);
Tensor layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps = 1e-5f);
// A pre-norm block's residual add and the norm after it in one pass (Note [fused residual norms]
// in zt/ops/transformer.h): sum = x + r and y = norm(sum), the values and gradients of ag::add
// then the norm.
struct AddNorm {
  Tensor sum, y;
};
AddNorm add_layer_norm(const Tensor& x, const Tensor& r, const Tensor& gamma, const Tensor& beta, float eps);
// Identity when p == 0; otherwise ops::dropout with this seed (the caller picks a fresh seed per call).
Tensor dropout(const Tensor& x, float p, uint64_t seed);
// qkv [B, T, (H + 2K) D] -> [B, T, H D]; see ops::attention (n_kv_head 0: n_head).
Tensor attention(const Tensor& qkv, int64_t n_head, bool causal, const Tensor* key_mask, int64_t n_kv_head = 0);
// The Llama family's ops (ops::rms_norm, ops::rope, ops::swiglu).
Tensor rms_norm(const Tensor& x, const Tensor& gamma, float eps);
AddNorm add_rms_norm(const Tensor& x, const Tensor& r, const Tensor& gamma, float eps);
Tensor rope(const Tensor& qkv, int64_t n_head, int64_t n_kv_head, const ops::RopeTables& tables);
Tensor swiglu(const Tensor& gate_up);
// x[:, index, :] of a [B, T, C] tensor -> [B, C] (BERT's [CLS] row); gradient scattered back.
Tensor select(const Tensor& x, int64_t dim, int64_t index);

Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor* b, int64_t stride, int64_t padding);
Tensor max_pool2d(const Tensor& x, int64_t k, int64_t s);

}  // namespace zt::ag
