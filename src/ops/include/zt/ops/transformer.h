#pragma once
// Op contracts of the transformer layers: embedding, layer norm, dropout and attention. Same
// conventions as ops.h: f32, bf16 and f16 inputs (16-bit compute in f32, round once), errors
// name the op, outputs are new contiguous tensors tagged current_tag().
#include <cstdint>
#include <vector>

#include "zt/core/tensor.h"

namespace zt::ops {

// ---- embedding ----
// weight [V, C] float, ids [...] i32 -> [..., C]. An id outside [0, V) throws naming the id and
// its flat position.
Tensor embedding(const Tensor& weight, const Tensor& ids);
// Dense gradient [V, C] in dtype dt: row ids[i] accumulates dy[i] (rows no id touches are 0).
Tensor embedding_backward(const Tensor& dy, const Tensor& ids, int64_t num_rows, DType dt);
// dst [V, C] (any float dtype) += that gradient, at the touched rows only: the values of
// axpy_(dst, 1, embedding_backward(dy, ids, V, dt)), without the dense [V, C] gradient.
void embedding_backward_add(const Tensor& dy, const Tensor& ids, DType dt, Tensor dst);
// The distinct rows ids touches, ascending (what a sparse gradient exchanges).
std::vector<int32_t> touched_rows(const Tensor& ids, int64_t num_rows);

// ---- layer norm over the last dimension (torch.nn.functional.layer_norm) ----
struct LayerNormResult {
  Tensor y;           // x's shape and dtype
  Tensor mean, rstd;  // [rows] f32, saved for backward
};
LayerNormResult layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps);
struct LayerNormGrads {
  Tensor dx, dgamma, dbeta;  // dgamma/dbeta in gamma's dtype
};
LayerNormGrads layer_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma,
                                   const LayerNormResult& saved);

// ---- dropout ----
// Keeps each element with probability 1-p and scales it by 1/(1-p). The mask is a counter-based
// hash of (seed, element index), so backward (and an activation-checkpoint recompute) regenerate
// it from the seed instead of storing it. p in [0, 1).
Tensor dropout(const Tensor& x, float p, uint64_t seed);
Tensor dropout_backward(const Tensor& dy, float p, uint64_t seed);

// ---- scaled dot-product attention, flash style ----
// qkv [B, T, 3C] as GPT-2's c_attn writes it (q, k, v each [B, T, C], head h at columns
// [h*D, (h+1)*D), D = C / n_head) -> out [B, T, C] = softmax(q k^T / sqrt(D) + mask) v per head.
// Computed in blocks of keys with an online softmax: never a whole T x T score matrix per head.
// causal: query t sees keys <= t. key_mask: optional [B, T] i32, 0 marks padding no query sees;
// a query that sees no key gets 0.
struct AttentionResult {
  Tensor out;  // [B, T, C], dtype of qkv
  Tensor lse;  // [B, n_head, T] f32: log-sum-exp of each query's scores, saved for backward
};
AttentionResult attention(const Tensor& qkv, int64_t n_head, bool causal, const Tensor* key_mask);
// -> dqkv [B, T, 3C] in qkv's dtype; recomputes scores block by block from lse.
Tensor attention_backward(const Tensor& dout, const Tensor& qkv, const AttentionResult& saved, int64_t n_head,
                          bool causal, const Tensor* key_mask);

}  // namespace zt::ops
