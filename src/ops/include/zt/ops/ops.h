#pragma once
// Op contracts: forward and backward kernels as pure functions on tensors (no autograd here;
// the autograd layer records them). Inputs may be strided (they are made contiguous first);
// outputs are new contiguous tensors tagged current_tag(). Floating ops accept f32 and bf16
// (bf16 computes in f32 and rounds the result back); binary ops need equal dtypes.
// Errors name the op: "[matmul] inner dimensions 3 and 4 differ".
#include <cstdint>
#include <optional>

#include "zt/core/tensor.h"

namespace zt::ops {

// ---- matrix products (oneDNN) ----
// C = op(A) @ op(B) for 2-D A, B; or batched 3-D with equal batch. op transposes when asked.
Tensor matmul(const Tensor& a, const Tensor& b, bool trans_a = false, bool trans_b = false);
// y = x @ w^T + b; x [..., in], w [out, in], b [out] (optional) -> [..., out].
Tensor linear(const Tensor& x, const Tensor& w, const Tensor* b);
struct LinearGrads {
  Tensor dx, dw, db;  // dx undefined unless need_dx; db undefined unless has_bias
};
LinearGrads linear_backward(const Tensor& dy, const Tensor& x, const Tensor& w, bool need_dx, bool has_bias);
// Number of cached oneDNN matmul primitives (steady state adds none; tests check this).
size_t matmul_cache_size();

// ---- elementwise (numpy broadcasting for binary ops) ----
Shape broadcast_shape(const Shape& a, const Shape& b);  // throws "[broadcast] ..." if incompatible
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor scale(const Tensor& a, float s);
Tensor add_scalar(const Tensor& a, float s);
Tensor sum_to(const Tensor& g, const Shape& shape);  // sums broadcast dims of g back to `shape`
void add_(Tensor& dst, const Tensor& src);           // dst += src (same shape), in place
void axpy_(Tensor& dst, float alpha, const Tensor& src);  // dst += alpha*src, in place

Tensor relu(const Tensor& x);
Tensor relu_backward(const Tensor& dy, const Tensor& x);
Tensor gelu(const Tensor& x);  // tanh approximation, as torch's gelu(approximate='tanh')
Tensor gelu_backward(const Tensor& dy, const Tensor& x);

// ---- reductions ----
Tensor sum(const Tensor& x);                                 // all elements -> shape []
Tensor sum(const Tensor& x, int64_t dim, bool keepdim);
Tensor mean(const Tensor& x);                                // -> shape []
Tensor mean(const Tensor& x, int64_t dim, bool keepdim);
// Backward of sum/mean over `dim`: expands dy (reduced shape) back to `in_shape`.
Tensor expand_reduced(const Tensor& dy, const Shape& in_shape, int64_t dim, bool keepdim, float factor);

// ---- softmax family (over the last dimension) ----
Tensor softmax(const Tensor& x);
Tensor softmax_backward(const Tensor& dy, const Tensor& y);  // y = softmax output
Tensor log_softmax(const Tensor& x);
Tensor log_softmax_backward(const Tensor& dy, const Tensor& y);  // y = log_softmax output

// Fused log-softmax + negative log-likelihood, mean over targets != ignore_index.
// logits [N, C] float, targets [N] i32. Returns loss (shape []) and keeps what backward needs.
struct CrossEntropyResult {
  Tensor loss;       // shape [], f32
  Tensor log_probs;  // [N, C] f32, saved for backward
  int64_t count = 0; // targets counted (not ignored)
};
CrossEntropyResult cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index = -100);
// dlogits = dloss * (softmax - onehot) / count, zero rows for ignored targets; dtype of logits.
Tensor cross_entropy_backward(float dloss, const CrossEntropyResult& saved, const Tensor& targets,
                              int64_t ignore_index, DType logits_dtype);

// ---- metrics ----
Tensor argmax(const Tensor& x);                                // over last dim -> i32
int64_t count_correct(const Tensor& logits, const Tensor& targets);  // argmax == target

}  // namespace zt::ops
