#pragma once
// The CUDA backend's kernels: the same contract as the CPU's (cpu/kernels.h, Note [kernel
// table]): arguments validated, inputs contiguous (matmul: possibly transposed views), outputs
// allocated on the same GPU; tensors' raw_data() are device pointers. Every kernel is enqueued
// on the device's current stream (zt::cuda_stream) and returns without synchronising, except
// those that return a host value (sum_all, sum_of_squares, has_nonfinite, touched_rows), which
// wait for their own result. 16-bit floats compute in f32 and round once, as on the CPU.
#include <cstdint>
#include <vector>

#include "../kernel_types.h"
#include "zt/core/tensor.h"
#include "zt/ops/update.h"

namespace zt::ops::cuda {

using kern::Binary;
using kern::ConvGeometry;
using kern::Unary;

// ---- matrix products (matmul.cu, cuBLASLt; bf16/f16 on tensor cores with f32 accumulation) ----
void matmul(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor* bias, Tensor& out);

// ---- elementwise (elementwise.cu) ----
void binary(Binary op, const Tensor& a, const Tensor& b, Tensor& out);  // numpy broadcasting
void unary(Unary op, float s, const Tensor& x, Tensor& out);
void unary_backward(Unary op, const Tensor& dy, const Tensor& x, Tensor& out);  // relu, gelu, gelu_erf, tanh
void sum_to(const Tensor& g, Tensor& out);
void gelu_bias_backward(const Tensor& dy, const Tensor& h, bool erf, Tensor& dh, Tensor& db);

// ---- reductions (reduce.cu) ----
double sum_all(const Tensor& x);
void sum_dim(const Tensor& x, int64_t outer, int64_t r, int64_t inner, float factor, Tensor& out);
void expand_reduced(const Tensor& dy, int64_t outer, int64_t r, int64_t inner, float factor, Tensor& out);
void argmax(const Tensor& x, Tensor& out);

// ---- softmax family and fused cross-entropy (softmax.cu) ----
void softmax(const Tensor& x, bool log, Tensor& out);
void softmax_backward(const Tensor& dy, const Tensor& y, bool log, Tensor& out);
void cross_entropy_rows(const Tensor& logits, const Tensor& targets, int64_t ignore_index, Tensor& lse, Tensor& nll);
void cross_entropy_backward(const Tensor& logits, const Tensor& lse, const Tensor& targets, int64_t ignore_index,
                            float k, Tensor& out);

// ---- transformer layers (transformer.cu) ----
void embedding(const Tensor& weight, const Tensor& ids, Tensor& out);
void embedding_backward(const Tensor& dy, const Tensor& ids, Tensor& out);
void embedding_backward_add(const Tensor& dy, const Tensor& ids, DType grad, Tensor& out);
std::vector<int32_t> touched_rows(const Tensor& ids, int64_t num_rows);
void layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps, Tensor& y, Tensor& mean,
                Tensor& rstd);
void layer_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma, const Tensor& mean, const Tensor& rstd,
                         Tensor& dx, Tensor& dgamma, Tensor& dbeta);
void dropout(const Tensor& x, float p, uint64_t seed, Tensor& out);  // the CPU's mask (Note [dropout mask])

// ---- attention (attention.cu): blocked, online softmax; shapes as in zt/ops/transformer.h ----
void attention(const Tensor& qkv, int64_t n_head, int64_t n_kv_head, bool causal, const Tensor* key_mask, Tensor& out,
               Tensor& lse);
void attention_backward(const Tensor& dout, const Tensor& qkv, const Tensor& out, const Tensor& lse, int64_t n_head,
                        int64_t n_kv_head, bool causal, const Tensor* key_mask, Tensor& dqkv);

// ---- the Llama family's ops (llama_ops.cu); as the CPU's (cpu/kernels.h) ----
void rms_norm(const Tensor& x, const Tensor& gamma, float eps, Tensor& y, Tensor& rstd);
void rms_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma, const Tensor& rstd, Tensor& dx,
                       Tensor& dgamma);
void rope(const Tensor& qkv, int64_t n_head, int64_t n_kv_head, const Tensor& cos, const Tensor& sin, bool inverse,
          Tensor& out);
void swiglu(const Tensor& gate_up, Tensor& out);
void swiglu_backward(const Tensor& dy, const Tensor& gate_up, Tensor& dgate_up);

// ---- precision (precision.cu) ----
void cast(const Tensor& src, Tensor& dst);
void scale_(Tensor& x, float s);
void axpy_(Tensor& dst, float alpha, const Tensor& src);
double sum_of_squares(const Tensor& x);
// The same sum left on the device: out (i64 [k], x's device) holds its double's bits at `slot`.
void sum_of_squares_to(const Tensor& x, Tensor& out, int64_t slot);
bool has_nonfinite(const Tensor& x);

// ---- convolutions (conv.cu, cuDNN) and max pooling ----
// Known deviation: a 16-bit conv2d with a bias rounds twice (cuDNN's output, then the bias add)
// where oneDNN rounds once: up to one ulp apart, within the op table's bf16/f16 tolerances.
void conv2d(const Tensor& x, const Tensor& w, const Tensor* b, const ConvGeometry& g, Tensor& y);
void conv2d_backward_data(const Tensor& dy, const Tensor& w, const ConvGeometry& g, Tensor& dx);
void conv2d_backward_weights(const Tensor& dy, const Tensor& x, const ConvGeometry& g, Tensor& dw, Tensor* db);
void max_pool2d(const Tensor& x, int64_t k, int64_t s, Tensor& y, Tensor& argmax);
void max_pool2d_backward(const Tensor& dy, const Tensor& argmax, Tensor& dx);

// ---- optimizer updates (update.cu), Note [device updates] in zt/ops/update.h ----
void adam_update(const AdamStep& s, const DeviceUpdate& u);
void sgd_update(const SgdStep& s, const DeviceUpdate& u);
// ---- ZeRO++'s wire formats (compress.cu), Note [block quantization] in zt/ops/compress.h ----
void quantize_blocks(const Tensor& x, int bits, Tensor& packet);
void dequantize_blocks(const Tensor& packet, int bits, bool accumulate, Tensor& out);
void average_rows(const Tensor& ids, const Tensor& rows, int64_t offset, int64_t V, int64_t C, int64_t dst_begin,
                  float divisor, Tensor& out);
void add_average_rows(const Tensor& ids, const Tensor& rows, int64_t offset, int64_t V, int64_t C, int64_t dst_begin,
                      float divisor, DType wire, Tensor& dst);

}  // namespace zt::ops::cuda
