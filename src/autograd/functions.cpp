// Differentiable ops: thin wrappers that call an op's forward in zt::ops and record a node
// whose backward calls the op's backward beside it. Gradients only for inputs that need them.
#include "zt/autograd/functions.h"

#include <memory>
#include <utility>
#include <vector>

#include "zt/autograd/autograd.h"
#include "zt/ops/ops.h"

namespace zt::ag {

using autograd::detached;
using autograd::record;
using autograd::requires_grad;
using Grads = std::vector<Tensor>;

namespace {
Grads two(ops::BinaryGrads g) { return Grads{std::move(g.da), std::move(g.db)}; }

// Gradients of (x, w[, b]) in the inputs' order: dx and db from a linear-style backward, the
// weight's (undefined here) made by weight_grad.
Grads linear_grads(ops::LinearGrads lg, size_t n, bool gb) {
  Grads r(n);
  r[0] = std::move(lg.dx);
  if (gb) r[2] = std::move(lg.db);
  return r;
}

std::vector<Tensor> linear_inputs(const Tensor& x, const Tensor& w, const Tensor* b) {
  std::vector<Tensor> inputs{x, w};
  if (b) inputs.push_back(*b);
  return inputs;
}

// The weight's gradient adds itself into its slot (Note [row gradients]): in row blocks when
// large (Note [weight gradients in row blocks]), written in place into a zeroed bucket (Note
// [gradients written in place]), never a separate [out, in] tensor added afterwards.
Tensor weight_grad(const Tensor& w, const Tensor& dy, const Tensor& x) {
  return autograd::adding_grad(
      w.shape(), w.dtype(), w.device(),
      [dy, x](Tensor& slot, bool zeroed) { ops::add_linear_weight_grad(slot, dy, x, zeroed); },
      [dy, x](Tensor& dst, int64_t row0) { ops::add_linear_weight_grad(dst, dy, x, /*zeroed=*/true, row0); });
}
}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  const bool ga = requires_grad(a), gb = requires_grad(b);
  return record(ops::matmul(a, b), {a, b}, "matmul",
                [a, b, ga, gb](const Tensor& g) { return two(ops::matmul_backward(g, a, b, ga, gb)); });
}

Tensor linear(const Tensor& x, const Tensor& w, const Tensor* b) {
  Tensor out = ops::linear(x, w, b);
  const bool gx = requires_grad(x), gw = requires_grad(w), gb = b && requires_grad(*b);
  const size_t n = b ? 3 : 2;
  return record(out, linear_inputs(x, w, b), "linear", [x, w, gx, gw, gb, n](const Tensor& g) {
    if (!gx && !gw && !gb) return Grads(n);
    Grads r = linear_grads(ops::linear_backward(g, x, w, gx, gb, /*need_dw=*/false), n, gb);
    if (gw) r[1] = weight_grad(w, g, x);
    return r;
  });
}

Tensor linear_gelu(const Tensor& x, const Tensor& w, const Tensor* b, ops::Gelu form) {
  Tensor h = ops::linear(x, w, b);
  Tensor out = ops::gelu(h, form);
  const bool gx = requires_grad(x), gw = requires_grad(w), gb = b && requires_grad(*b);
  const size_t n = b ? 3 : 2;
  return record(out, linear_inputs(x, w, b), "linear_gelu", [x, w, h, gx, gw, gb, n, form](const Tensor& g) {
    if (!gx && !gw && !gb) return Grads(n);
    Tensor dh;
    Grads r = linear_grads(ops::linear_gelu_backward(g, x, w, h, gx, gb, /*need_dw=*/false, &dh, form), n, gb);
    if (gw) r[1] = weight_grad(w, dh, x);
    return r;
  });
}

Tensor add(const Tensor& a, const Tensor& b) {
  const bool ga = requires_grad(a), gb = requires_grad(b);
  return record(ops::add(a, b), {a, b}, "add", [sa = a.shape(), sb = b.shape(), ga, gb](const Tensor& g) {
    return two(ops::add_backward(g, sa, sb, ga, gb));
  });
}

Tensor sub(const Tensor& a, const Tensor& b) {
  const bool ga = requires_grad(a), gb = requires_grad(b);
  return record(ops::sub(a, b), {a, b}, "sub", [sa = a.shape(), sb = b.shape(), ga, gb](const Tensor& g) {
    return two(ops::sub_backward(g, sa, sb, ga, gb));
  });
}

Tensor mul(const Tensor& a, const Tensor& b) {
  const bool ga = requires_grad(a), gb = requires_grad(b);
  // Save only what the other gradient needs.
  Tensor sa = gb ? a : Tensor(), sb = ga ? b : Tensor();
  return record(ops::mul(a, b), {a, b}, "mul", [sa, sb, as = a.shape(), bs = b.shape(), ga, gb](const Tensor& g) {
    return two(ops::mul_backward(g, sa, sb, as, bs, ga, gb));
  });
}

Tensor scale(const Tensor& a, float s) {
  return record(ops::scale(a, s), {a}, "scale", [s](const Tensor& g) { return Grads{ops::scale(g, s)}; });
}

Tensor relu(const Tensor& x) {
  return record(ops::relu(x), {x}, "relu", [x](const Tensor& g) { return Grads{ops::relu_backward(g, x)}; });
}

Tensor gelu(const Tensor& x, ops::Gelu form) {
  return record(ops::gelu(x, form), {x}, "gelu",
                [x, form](const Tensor& g) { return Grads{ops::gelu_backward(g, x, form)}; });
}

Tensor tanh(const Tensor& x) {
  return record(ops::tanh(x), {x}, "tanh", [x](const Tensor& g) { return Grads{ops::tanh_backward(g, x)}; });
}

Tensor sum(const Tensor& x) {
  return record(ops::sum(x), {x}, "sum", [shape = x.shape(), dt = x.dtype()](const Tensor& g) {
    return Grads{ops::sum_backward(g, shape, dt)};
  });
}

Tensor sum(const Tensor& x, int64_t dim, bool keepdim) {
  return record(ops::sum(x, dim, keepdim), {x}, "sum_dim", [shape = x.shape(), dim, keepdim](const Tensor& g) {
    return Grads{ops::sum_backward(g, shape, dim, keepdim)};
  });
}

Tensor mean(const Tensor& x) {
  return record(ops::mean(x), {x}, "mean", [shape = x.shape(), dt = x.dtype()](const Tensor& g) {
    return Grads{ops::mean_backward(g, shape, dt)};
  });
}

Tensor mean(const Tensor& x, int64_t dim, bool keepdim) {
  return record(ops::mean(x, dim, keepdim), {x}, "mean_dim", [shape = x.shape(), dim, keepdim](const Tensor& g) {
    return Grads{ops::mean_backward(g, shape, dim, keepdim)};
  });
}

Tensor softmax(const Tensor& x) {
  Tensor y = ops::softmax(x);
  return record(y, {x}, "softmax", [y = detached(y)](const Tensor& g) { return Grads{ops::softmax_backward(g, y)}; });
}

Tensor log_softmax(const Tensor& x) {
  Tensor y = ops::log_softmax(x);
  return record(y, {x}, "log_softmax",
                [y = detached(y)](const Tensor& g) { return Grads{ops::log_softmax_backward(g, y)}; });
}

Tensor reshape(const Tensor& x, const Shape& shape) {
  Tensor out = x.reshape(shape);
  if (out.same(x)) out = detached(out);  // never share x's autograd slot
  return record(out, {x}, "reshape", [in = x.shape()](const Tensor& g) { return Grads{g.reshape(in)}; });
}

Tensor transpose(const Tensor& x, int64_t d0, int64_t d1) {
  return record(x.transpose(d0, d1), {x}, "transpose",
                [d0, d1](const Tensor& g) { return Grads{g.transpose(d0, d1)}; });
}

// Note [one-pass classifier] (src/ops/softmax.cpp): where the logits' gradient will be asked for,
// the forward writes it; f16 logits keep the two passes (their gradient waits for the loss scale).
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index) {
  const bool one_pass = autograd::grad_enabled() && requires_grad(logits) && logits.dtype() != DType::f16;
  auto saved = std::make_shared<ops::CrossEntropyResult>(ops::cross_entropy(logits, targets, ignore_index, one_pass));
  Tensor loss = saved->loss;
  saved->loss = Tensor();  // the node must not own its own output (reference cycle)
  return record(loss, {logits, targets}, "cross_entropy", [saved, targets, ignore_index](const Tensor& g) {
    if (saved->grad.defined()) {  // handed over whole, so the engine takes it without a copy
      Tensor grad = std::exchange(saved->grad, Tensor());
      if (const float d = g.item(); d != 1.f) ops::scale_(grad, d);
      return Grads{grad, Tensor()};
    }
    return Grads{ops::cross_entropy_backward(g.item(), *saved, targets, ignore_index), Tensor()};
  });
}

}  // namespace zt::ag
