#pragma once
// The CPU backend: one kernel per op. Callers (the contracts in src/ops/*.cpp) have validated
// the arguments, made inputs contiguous (matmul takes strided views) and allocated outputs;
// kernels only compute. 16-bit floats compute in f32 and round once on the way out.
#include <cstdint>
#include <vector>

#include "../kernel_types.h"
#include "zt/core/tensor.h"
#include "zt/ops/update.h"

namespace zt::ops::cpu {

// ---- matrix products (matmul.cpp): out = op(a) @ op(b) (+ bias), 2-D or batched 3-D ----
void matmul(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor* bias, Tensor& out);
// ---- optimizer updates (update.cpp, Note [device updates]) ----
void adam_update(const AdamStep& s, const DeviceUpdate& u);
void sgd_update(const SgdStep& s, const DeviceUpdate& u);
// ---- ZeRO++'s wire formats (compress.cpp), Note [block quantization] in zt/ops/compress.h ----
void quantize_blocks(const Tensor& x, int bits, Tensor& packet);
void dequantize_blocks(const Tensor& packet, int bits, bool accumulate, Tensor& out);
void average_rows(const Tensor& ids, const Tensor& rows, int64_t offset, int64_t V, int64_t C, int64_t dst_begin,
                  float divisor, Tensor& out);
void add_average_rows(const Tensor& ids, const Tensor& rows, int64_t offset, int64_t V, int64_t C, int64_t dst_begin,
                      float divisor, DType wire, Tensor& dst);

bool matmul_native(DType dt);
void set_matmul_lowp_fallback(bool force);
bool matmul_lowp_fallback();  // forced (Note [16-bit products]: the f32 path)
bool cpu_has_amx();
int64_t matmul_fallback_count();
size_t matmul_cache_size();

// ---- elementwise (elementwise.cpp) ----
using kern::Binary;
using kern::Unary;
void binary(Binary op, const Tensor& a, const Tensor& b, Tensor& out);  // out has the broadcast shape
void unary(Unary op, float s, const Tensor& x, Tensor& out);
void unary_backward(Unary op, const Tensor& dy, const Tensor& x, Tensor& out);  // relu, gelu, gelu_erf, tanh
void sum_to(const Tensor& g, Tensor& out);  // sums g's broadcast dimensions into out
// dh = dy * gelu'(h) and db = sum over rows of dh (h [rows, C] viewed flat; db [C]), one pass.
void gelu_bias_backward(const Tensor& dy, const Tensor& h, bool erf, Tensor& dh, Tensor& db);

// ---- reductions (reduce.cpp); x viewed as [outer, r, inner] around the reduced dimension ----
double sum_all(const Tensor& x);
void sum_dim(const Tensor& x, int64_t outer, int64_t r, int64_t inner, float factor, Tensor& out);
void expand_reduced(const Tensor& dy, int64_t outer, int64_t r, int64_t inner, float factor, Tensor& out);
void argmax(const Tensor& x, Tensor& out);  // over the last dimension, into i32

// ---- softmax family over the last dimension (softmax.cpp), computed in f32 ----
void softmax(const Tensor& x, bool log, Tensor& out);  // out may be f32 for 16-bit x
void softmax_backward(const Tensor& dy, const Tensor& y, bool log, Tensor& out);
// Per row: lse = log(sum(exp(x))) and nll = lse - x[target] (0 where target == ignore_index).
void cross_entropy_rows(const Tensor& logits, const Tensor& targets, int64_t ignore_index, Tensor& lse, Tensor& nll);
// dlogits = k * (exp(x - lse) - onehot(target)), zero rows where target == ignore_index.
void cross_entropy_backward(const Tensor& logits, const Tensor& lse, const Tensor& targets, int64_t ignore_index,
                            float k, Tensor& out);

// ---- transformer layers (embedding.cpp, layer_norm.cpp, dropout.cpp); ids checked in range ----
void embedding(const Tensor& weight, const Tensor& ids, Tensor& out);       // out [..., C], weight's dtype
void embedding_backward(const Tensor& dy, const Tensor& ids, Tensor& out);  // out [V, C] dense, any float dtype
void embedding_backward_add(const Tensor& dy, const Tensor& ids, DType grad, Tensor& out);
std::vector<int32_t> touched_rows(const Tensor& ids, int64_t num_rows);
// gamma, beta: any float dtype; mean, rstd: [rows] f32.
void layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps, Tensor& y, Tensor& mean,
                Tensor& rstd);
// dy has x's dtype; dgamma, dbeta have gamma's.
void layer_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma, const Tensor& mean, const Tensor& rstd,
                         Tensor& dx, Tensor& dgamma, Tensor& dbeta);
void dropout(const Tensor& x, float p, uint64_t seed, Tensor& out);

// ---- attention (attention.cpp): flash style, f32 blocks; shapes as in transformer.h ----
void attention(const Tensor& qkv, int64_t n_head, int64_t n_kv_head, bool causal, const Tensor* key_mask, Tensor& out,
               Tensor& lse);
// dout, qkv and out share qkv's dtype; dqkv is written whole.
void attention_backward(const Tensor& dout, const Tensor& qkv, const Tensor& out, const Tensor& lse, int64_t n_head,
                        int64_t n_kv_head, bool causal, const Tensor* key_mask, Tensor& dqkv);

// ---- the Llama family's ops (llama_ops.cpp); shapes as in zt/ops/transformer.h ----
void rms_norm(const Tensor& x, const Tensor& gamma, float eps, Tensor& y, Tensor& rstd);  // rstd [rows] f32
void rms_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma, const Tensor& rstd, Tensor& dx,
                       Tensor& dgamma);
// cos, sin: [T, D/2] f32; out has qkv's shape and dtype.
void rope(const Tensor& qkv, int64_t n_head, int64_t n_kv_head, const Tensor& cos, const Tensor& sin, bool inverse,
          Tensor& out);
void swiglu(const Tensor& gate_up, Tensor& out);
void swiglu_backward(const Tensor& dy, const Tensor& gate_up, Tensor& dgate_up);

// ---- precision (precision.cpp) ----
void cast(const Tensor& src, Tensor& dst);  // same numel, any float dtypes
void scale_(Tensor& x, float s);
void axpy_(Tensor& dst, float alpha, const Tensor& src);  // same numel, any float dtypes
double sum_of_squares(const Tensor& x);
// The same sum left on the device: out (i64 [k], x's device) holds its double's bits at `slot`.
void sum_of_squares_to(const Tensor& x, Tensor& out, int64_t slot);
bool has_nonfinite(const Tensor& x);

}  // namespace zt::ops::cpu
