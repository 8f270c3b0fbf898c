// Contracts of the elementwise ops and their backward: broadcasting binary ops, scalar ops,
// activations. Each validates, infers the output, allocates and dispatches to the backend.
#include <algorithm>

#include "contract.h"
#include "cpu/kernels.h"
#include "zt/ops/ops.h"

namespace zt::ops {

using detail::check_float;

Shape broadcast_shape(const Shape& a, const Shape& b) {
  const size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    ZT_CHECK(da == db || da == 1 || db == 1, "[broadcast] shapes ", shape_str(a), " and ", shape_str(b),
             " are incompatible at dimension ", i, " (", da, " vs ", db, ")");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

namespace {

Tensor binary(kern::Binary op, const Tensor& a_in, const Tensor& b_in, const char* name) {
  check_float(a_in, name);
  check_float(b_in, name);
  detail::check_same_dtype(a_in, b_in, name);
  Tensor out = Tensor::empty(broadcast_shape(a_in.shape(), b_in.shape()), a_in.dtype(), a_in.device());
  if (out.numel() == 0) return out;
  Tensor a = a_in.contiguous(), b = b_in.contiguous();
  ZT_RUN(binary, name, a.device(), op, a, b, out);
  return out;
}

kern::Unary gelu_kind(Gelu form) { return form == Gelu::erf ? kern::Unary::gelu_erf : kern::Unary::gelu; }

Tensor unary(kern::Unary op, float s, const Tensor& x_in, const char* name) {
  check_float(x_in, name);
  Tensor x = x_in.contiguous();
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (out.numel() == 0) return out;
  ZT_RUN(unary, name, x.device(), op, s, x, out);
  return out;
}

Tensor unary_backward(kern::Unary op, const Tensor& dy_in, const Tensor& x_in, const char* name) {
  check_float(dy_in, name);
  check_float(x_in, name);
  detail::check_same_dtype(dy_in, x_in, name);
  detail::check_same_shape(dy_in, x_in, name, "dy", "x");
  Tensor dy = dy_in.contiguous(), x = x_in.contiguous();
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (out.numel() == 0) return out;
  ZT_RUN(unary_backward, name, x.device(), op, dy, x, out);
  return out;
}

// Gradient of a broadcast input: reduce only when the shapes differ.
Tensor reduce_to(const Tensor& g, const Shape& shape) { return g.shape() == shape ? g : sum_to(g, shape); }

}  // namespace

Tensor add(const Tensor& a, const Tensor& b) { return binary(kern::Binary::add, a, b, "add"); }
Tensor sub(const Tensor& a, const Tensor& b) { return binary(kern::Binary::sub, a, b, "sub"); }
Tensor mul(const Tensor& a, const Tensor& b) { return binary(kern::Binary::mul, a, b, "mul"); }

BinaryGrads add_backward(const Tensor& dy, const Shape& a, const Shape& b, bool need_a, bool need_b) {
  return {need_a ? reduce_to(dy, a) : Tensor(), need_b ? reduce_to(dy, b) : Tensor()};
}

BinaryGrads sub_backward(const Tensor& dy, const Shape& a, const Shape& b, bool need_a, bool need_b) {
  return {need_a ? reduce_to(dy, a) : Tensor(), need_b ? reduce_to(scale(dy, -1.f), b) : Tensor()};
}

BinaryGrads mul_backward(const Tensor& dy, const Tensor& a, const Tensor& b, const Shape& a_shape, const Shape& b_shape,
                         bool need_a, bool need_b) {
  return {need_a ? reduce_to(mul(dy, b), a_shape) : Tensor(), need_b ? reduce_to(mul(dy, a), b_shape) : Tensor()};
}

Tensor scale(const Tensor& a, float s) { return unary(kern::Unary::scale, s, a, "scale"); }
Tensor add_scalar(const Tensor& a, float s) { return unary(kern::Unary::add_scalar, s, a, "add_scalar"); }

Tensor sum_to(const Tensor& g_in, const Shape& shape) {
  check_float(g_in, "sum_to");
  const Shape& gs = g_in.shape();
  bool ok = shape.size() <= gs.size();
  for (size_t i = 0; ok && i < shape.size(); ++i) {
    const int64_t d = shape[i], g = gs[gs.size() - shape.size() + i];
    ok = d == g || d == 1;
  }
  ZT_CHECK(ok, "[sum_to] cannot reduce ", shape_str(gs), " to ", shape_str(shape));
  if (shape == gs) return g_in.clone();  // nothing to reduce (also covers 0-d)
  Tensor g = g_in.contiguous();
  Tensor out = Tensor::empty(shape, g.dtype(), g.device());
  if (out.numel() == 0) return out;
  ZT_RUN(sum_to, __func__, g.device(), g, out);
  return out;
}

Tensor relu(const Tensor& x) { return unary(kern::Unary::relu, 0.f, x, "relu"); }
Tensor relu_backward(const Tensor& dy, const Tensor& x) {
  return unary_backward(kern::Unary::relu, dy, x, "relu_backward");
}
Tensor gelu(const Tensor& x, Gelu form) { return unary(gelu_kind(form), 0.f, x, "gelu"); }
Tensor gelu_backward(const Tensor& dy, const Tensor& x, Gelu form) {
  return unary_backward(gelu_kind(form), dy, x, "gelu_backward");
}
Tensor tanh(const Tensor& x) { return unary(kern::Unary::tanh, 0.f, x, "tanh"); }
Tensor tanh_backward(const Tensor& dy, const Tensor& x) {
  return unary_backward(kern::Unary::tanh, dy, x, "tanh_backward");
}

GeluBiasGrads gelu_bias_backward(const Tensor& dy_in, const Tensor& h_in, Gelu form) {
  const char* op = "gelu_bias_backward";
  check_float(dy_in, op);
  check_float(h_in, op);
  detail::check_same_dtype(dy_in, h_in, op);
  detail::check_same_shape(dy_in, h_in, op, "dy", "h");
  ZT_CHECK(h_in.dim() >= 1, "[", op, "] h needs a last (bias) dimension, got a 0-d tensor");
  Tensor dy = dy_in.contiguous(), h = h_in.contiguous();
  GeluBiasGrads g{Tensor::empty(h.shape(), h.dtype(), h.device()), Tensor::empty({h.size(-1)}, h.dtype(), h.device())};
  if (h.numel() == 0) {  // no rows: the bias gradient is 0
    g.db.zero_();
    return g;
  }
  ZT_RUN(gelu_bias_backward, __func__, h.device(), dy, h, form == Gelu::erf, g.dh, g.db);
  return g;
}

}  // namespace zt::ops
