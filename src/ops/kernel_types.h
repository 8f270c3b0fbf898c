#pragma once
// Argument types shared by every backend's kernels (cpu/kernels.h, cuda/kernels.h) and the
// kernel table (kernel_table.h): which elementwise op, a convolution's sizes, an update's scalars.
#include <cstdint>

namespace zt::ops::kern {

enum class Binary { add, sub, mul };
enum class Unary { scale, add_scalar, relu, gelu, gelu_erf, tanh };  // gelu: the tanh form

// Sizes of one convolution: x [n, cin, h, w], w [cout, cin, kh, kw] -> y [n, cout, ho, wo].
struct ConvGeometry {
  int64_t n, cin, h, w, cout, kh, kw, stride, pad, ho, wo;
};

}  // namespace zt::ops::kern
