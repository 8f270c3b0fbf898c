#pragma once
// Op contracts of the transformer layers: embedding, layer norm, dropout and attention. Same
// conventions as ops.h: f32, bf16 and f16 inputs (16-bit compute in f32, round once), errors
// name the op, outputs are new contiguous tensors tagged current_tag().
#include <cstdint>
#include <string>
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
// Note [fused residual norms]: a pre-norm block's residual add and the norm after it are one pass
// (residual given: the norm of x + residual, whose sum, the values ops::add makes, comes back in
// `sum`); the norm's backward writes dx into a given tensor, or adds it to the gradient already
// there (accumulate: the residual's, rounded once), so no separate add pass reads dx again.
struct LayerNormResult {
  Tensor y;           // x's shape and dtype
  Tensor mean, rstd;  // [rows] f32, saved for backward
  Tensor sum;         // x + residual where a residual was given
};
LayerNormResult layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps,
                           const Tensor* residual = nullptr);
struct LayerNormGrads {
  Tensor dx, dgamma, dbeta;  // dgamma/dbeta in gamma's dtype; dx undefined where dx_into took it
};
// x: what was normalised (the sum, where the forward took a residual). dx_into: contiguous, x's
// shape and dtype.
LayerNormGrads layer_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma, const LayerNormResult& saved,
                                   Tensor* dx_into = nullptr, bool accumulate = false);

// ---- dropout ----
// Keeps each element with probability 1-p and scales it by 1/(1-p). The mask is a counter-based
// hash of (seed, element index), so backward (and an activation-checkpoint recompute) regenerate
// it from the seed instead of storing it. p in [0, 1).
Tensor dropout(const Tensor& x, float p, uint64_t seed);
Tensor dropout_backward(const Tensor& dy, float p, uint64_t seed);

// ---- scaled dot-product attention, flash style ----
// qkv [B, T, (H + 2K) D] as a fused projection writes it: H query heads, then K key heads, then K
// value heads, head h at columns [h*D, (h+1)*D) of its part (GPT-2's c_attn: K = H, [B, T, 3C]).
// -> out [B, T, H D] = softmax(q k^T / sqrt(D) + mask) v per head, query head h reading key/value
// head h / (H / K) in place (grouped-query attention; no repeated copy of k and v). n_kv_head 0
// means n_head. Computed in blocks of keys with an online softmax: never a whole T x T score
// matrix per head. causal: query t sees keys <= t. key_mask: optional [B, T] i32, 0 marks padding
// no query sees; a query that sees no key gets 0.
struct AttentionResult {
  Tensor out;  // [B, T, H D], dtype of qkv
  Tensor lse;  // [B, n_head, T] f32: log-sum-exp of each query's scores, saved for backward
};
AttentionResult attention(const Tensor& qkv, int64_t n_head, bool causal, const Tensor* key_mask,
                          int64_t n_kv_head = 0);
// Which kernels attention runs on d for heads of this shape and dtype, as the start line names them
// (on a GPU: cuDNN's fused flash attention, or the own kernels and why cuDNN's does not take it).
std::string attention_path(Device d, DType dt, int64_t n_head, int64_t n_kv_head, int64_t head_size, bool key_mask);
// -> dqkv in qkv's shape and dtype; recomputes scores block by block from lse.
Tensor attention_backward(const Tensor& dout, const Tensor& qkv, const AttentionResult& saved, int64_t n_head,
                          bool causal, const Tensor* key_mask, int64_t n_kv_head = 0);

// ---- the Llama family: RMSNorm, rotary position embeddings, SwiGLU ----
// RMSNorm over the last dimension (Hugging Face's LlamaRMSNorm): y = x / sqrt(mean(x^2) + eps) * gamma.
// A residual and dx_into as layer_norm's (Note [fused residual norms]).
struct RmsNormResult {
  Tensor y;     // x's shape and dtype
  Tensor rstd;  // [rows] f32, saved for backward
  Tensor sum;   // x + residual where a residual was given
};
RmsNormResult rms_norm(const Tensor& x, const Tensor& gamma, float eps, const Tensor* residual = nullptr);
struct RmsNormGrads {
  Tensor dx, dgamma;  // dgamma in gamma's dtype; dx undefined where dx_into took it
};
RmsNormGrads rms_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma, const RmsNormResult& saved,
                               Tensor* dx_into = nullptr, bool accumulate = false);

// Rotary position embeddings in Hugging Face's convention (Note [rotary halves] in cpu/llama_ops.cpp)
// on a packed qkv as attention takes it: the query and key heads of token t rotate by t * theta^(-2i/D),
// the value heads pass through. D must be even. inverse: the transpose (rope's backward).
// tables: rope_tables(at least T, D, ...) on qkv's device.
struct RopeTables {
  Tensor cos, sin;  // [positions, D/2] f32
};
Tensor rope(const Tensor& qkv, int64_t n_head, int64_t n_kv_head, const RopeTables& tables, bool inverse = false);
// cos and sin of positions [0, T) times theta^(-2i/D) as Hugging Face computes the frequencies (f32),
// the angles' cos and sin in double rounded once on the host: every backend rotates by the same values.
RopeTables rope_tables(int64_t T, int64_t D, float theta, Device device);

// gate_up [..., 2I] (gate, then up: Phi-3's gate_up_proj) -> silu(gate) * up [..., I].
Tensor swiglu(const Tensor& gate_up);
Tensor swiglu_backward(const Tensor& dy, const Tensor& gate_up);

}  // namespace zt::ops
