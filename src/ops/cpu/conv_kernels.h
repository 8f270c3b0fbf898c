#pragma once
// The CPU kernels of the convolutional layers (NCHW), apart from kernels.h so that its ops and
// these grow independently. As there: arguments validated, inputs contiguous, outputs allocated.
#include <cstdint>

#include "../kernel_types.h"
#include "zt/core/tensor.h"

namespace zt::ops::cpu {

using kern::ConvGeometry;

// ---- convolution (conv.cpp, oneDNN primitives cached by geometry and dtype) ----
void conv2d(const Tensor& x, const Tensor& w, const Tensor* b, const ConvGeometry& g, Tensor& y);
void conv2d_backward_data(const Tensor& dy, const Tensor& w, const ConvGeometry& g, Tensor& dx);
// dw, and db when given (the bias gradient comes from the same pass).
void conv2d_backward_weights(const Tensor& dy, const Tensor& x, const ConvGeometry& g, Tensor& dw, Tensor* db);
bool conv_native(DType dt);
void set_conv_lowp_fallback(bool force);
bool conv_lowp_fallback();
int64_t conv_fallback_count();
size_t conv_cache_size();

// ---- max pooling, k x k windows with stride s, no padding (pool.cpp) ----
void max_pool2d(const Tensor& x, int64_t k, int64_t s, Tensor& y, Tensor& argmax);
// dx (zeroed here) gets dy at each window's argmax; overlapping windows add up in f32.
void max_pool2d_backward(const Tensor& dy, const Tensor& argmax, Tensor& dx);

}  // namespace zt::ops::cpu
