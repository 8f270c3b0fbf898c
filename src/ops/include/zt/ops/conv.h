#pragma once
// Op contracts of the convolutional layers (oneDNN primitives), NCHW. Conventions as ops.h.
#include <cstdint>

#include "zt/core/tensor.h"

namespace zt::ops {

struct Conv2dParams {
  int64_t stride = 1, padding = 0;
};
// x [N, Cin, H, W], w [Cout, Cin, kh, kw], b [Cout] (optional) -> [N, Cout, Ho, Wo] (torch's conv2d).
Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor* b, Conv2dParams p);
struct Conv2dGrads {
  Tensor dx, dw, db;  // dx undefined unless need_dx; db undefined unless has_bias
};
Conv2dGrads conv2d_backward(const Tensor& dy, const Tensor& x, const Tensor& w, Conv2dParams p, bool need_dx,
                            bool has_bias);

// Max pooling, kernel k x k, stride s, no padding: [N, C, H, W] -> [N, C, (H-k)/s+1, (W-k)/s+1].
struct MaxPoolResult {
  Tensor y;
  Tensor argmax;  // [N, C, Ho, Wo] i32: flat index into the H*W plane of each maximum, for backward
};
MaxPoolResult max_pool2d(const Tensor& x, int64_t k, int64_t s);
Tensor max_pool2d_backward(const Tensor& dy, const MaxPoolResult& saved, const Shape& x_shape);

// Number of cached oneDNN convolution primitives (steady state adds none; tests check this).
size_t conv_cache_size();
// Whether this CPU has a oneDNN convolution in dt. Where a 16-bit dtype has none, convolutions
// widen to f32 and round once (the fallback); tests can force that path.
bool conv_native(DType dt);
void set_conv_lowp_fallback_for_testing(bool force);
int64_t conv_fallback_count();  // 16-bit convolutions computed through the fallback so far

}  // namespace zt::ops
