#pragma once
// Argument types shared by every backend's kernels (cpu/kernels.h, cuda/kernels.h) and the
// kernel table (kernel_table.h): which elementwise op, a convolution's sizes, an update's scalars.
#include <cstdint>
#include <type_traits>

namespace zt::ops::kern {

enum class Binary { add, sub, mul };
// f(std::integral_constant<Binary, op>{}): each backend's binary kernel is a template on the op.
template <typename F>
void with_binary(Binary op, F&& f) {
  switch (op) {
    case Binary::add:
      return f(std::integral_constant<Binary, Binary::add>{});
    case Binary::sub:
      return f(std::integral_constant<Binary, Binary::sub>{});
    case Binary::mul:
      return f(std::integral_constant<Binary, Binary::mul>{});
  }
}
enum class Unary { scale, add_scalar, relu, gelu, gelu_erf, tanh };  // gelu: the tanh form

// Sizes of one convolution: x [n, cin, h, w], w [cout, cin, kh, kw] -> y [n, cout, ho, wo].
struct ConvGeometry {
  int64_t n, cin, h, w, cout, kh, kw, stride, pad, ho, wo;
};

}  // namespace zt::ops::kern
