#pragma once
// Differentiable ops: each calls the forward kernel in zt::ops and records a node whose
// backward calls the matching backward kernel. Shapes and dtypes as in zt/ops/ops.h.
#include <cstdint>

#include "zt/core/tensor.h"
#include "zt/ops/gelu.h"

namespace zt::ag {

Tensor matmul(const Tensor& a, const Tensor& b);  // 2-D or batched 3-D
Tensor linear(const Tensor& x, const Tensor& w, const Tensor* b);
// gelu(linear(x, w, b)) by the same two forward ops; keeps the pre-activation and runs the fused
// backward (ops::linear_gelu_backward: dh and the bias gradient in one pass).
Tensor linear_gelu(const Tensor& x, const Tensor& w, const Tensor* b, ops::Gelu form = ops::Gelu::tanh);
Tensor add(const Tensor& a, const Tensor& b);  // broadcasting
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor scale(const Tensor& a, float s);
Tensor relu(const Tensor& x);
Tensor gelu(const Tensor& x, ops::Gelu form = ops::Gelu::tanh);
Tensor tanh(const Tensor& x);
Tensor sum(const Tensor& x);
Tensor sum(const Tensor& x, int64_t dim, bool keepdim);
Tensor mean(const Tensor& x);
Tensor mean(const Tensor& x, int64_t dim, bool keepdim);
Tensor softmax(const Tensor& x);      // last dim
Tensor log_softmax(const Tensor& x);  // last dim
Tensor reshape(const Tensor& x, const Shape& shape);
Tensor transpose(const Tensor& x, int64_t d0, int64_t d1);
// Fused log-softmax + NLL, mean over non-ignored targets; logits [N, C], targets [N] i32.
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index = -100);

}  // namespace zt::ag
