// Differentiable ops: forward kernel + a recorded node whose backward calls the matching
// backward kernel. Gradients are computed only for inputs that require them.
#include "zt/autograd/functions.h"

#include <memory>
#include <vector>

#include "zt/autograd/autograd.h"
#include "zt/ops/ops.h"

namespace zt::ag {

using autograd::record;
using autograd::requires_grad;
using Grads = std::vector<Tensor>;

namespace {
// A second handle on t's storage with its own (empty) autograd slot: saving an op's own output
// this way avoids a reference cycle output -> node -> output.
Tensor detached(const Tensor& t) {
  auto impl = std::make_shared<TensorImpl>(*t.impl());
  impl->autograd.reset();
  return Tensor(std::move(impl));
}

// Gradient of a broadcast input: reduce only when the shapes differ.
Tensor reduce_to(const Tensor& g, const Shape& shape) { return g.shape() == shape ? g : ops::sum_to(g, shape); }
}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  Tensor out = ops::matmul(a, b);
  const bool ga = requires_grad(a), gb = requires_grad(b);
  return record(out, {a, b}, "matmul", [a, b, ga, gb](const Tensor& g) {
    Grads r(2);
    if (ga) r[0] = ops::matmul(g, b, false, true);  // dA = dC @ B^T
    if (gb) r[1] = ops::matmul(a, g, true, false);  // dB = A^T @ dC
    return r;
  });
}

Tensor linear(const Tensor& x, const Tensor& w, const Tensor* b) {
  Tensor out = ops::linear(x, w, b);
  const bool gx = requires_grad(x), gw = requires_grad(w), gb = b && requires_grad(*b);
  std::vector<Tensor> inputs{x, w};
  if (b) inputs.push_back(*b);
  const size_t n = inputs.size();
  return record(out, std::move(inputs), "linear", [x, w, gx, gw, gb, n](const Tensor& g) {
    Grads r(n);
    if (!gx && !gw && !gb) return r;
    auto lg = ops::linear_backward(g, x, w, gx, gb);
    r[0] = lg.dx;
    if (gw) r[1] = lg.dw;
    if (gb) r[2] = lg.db;
    return r;
  });
}

Tensor add(const Tensor& a, const Tensor& b) {
  Tensor out = ops::add(a, b);
  const bool ga = requires_grad(a), gb = requires_grad(b);
  return record(out, {a, b}, "add", [sa = a.shape(), sb = b.shape(), ga, gb](const Tensor& g) {
    return Grads{ga ? reduce_to(g, sa) : Tensor(), gb ? reduce_to(g, sb) : Tensor()};
  });
}

Tensor sub(const Tensor& a, const Tensor& b) {
  Tensor out = ops::sub(a, b);
  const bool ga = requires_grad(a), gb = requires_grad(b);
  return record(out, {a, b}, "sub", [sa = a.shape(), sb = b.shape(), ga, gb](const Tensor& g) {
    return Grads{ga ? reduce_to(g, sa) : Tensor(), gb ? reduce_to(ops::scale(g, -1.f), sb) : Tensor()};
  });
}

Tensor mul(const Tensor& a, const Tensor& b) {
  Tensor out = ops::mul(a, b);
  const bool ga = requires_grad(a), gb = requires_grad(b);
  // Save only what the other gradient needs.
  Tensor sa = gb ? a : Tensor(), sb = ga ? b : Tensor();
  return record(out, {a, b}, "mul", [sa, sb, shape_a = a.shape(), shape_b = b.shape(), ga, gb](const Tensor& g) {
    return Grads{ga ? reduce_to(ops::mul(g, sb), shape_a) : Tensor(),
                 gb ? reduce_to(ops::mul(g, sa), shape_b) : Tensor()};
  });
}

Tensor scale(const Tensor& a, float s) {
  return record(ops::scale(a, s), {a}, "scale", [s](const Tensor& g) { return Grads{ops::scale(g, s)}; });
}

Tensor relu(const Tensor& x) {
  return record(ops::relu(x), {x}, "relu", [x](const Tensor& g) { return Grads{ops::relu_backward(g, x)}; });
}

Tensor gelu(const Tensor& x) {
  return record(ops::gelu(x), {x}, "gelu", [x](const Tensor& g) { return Grads{ops::gelu_backward(g, x)}; });
}

Tensor sum(const Tensor& x) {
  return record(ops::sum(x), {x}, "sum", [shape = x.shape(), dt = x.dtype()](const Tensor& g) {
    return Grads{Tensor::full(shape, g.item(), dt)};
  });
}

Tensor sum(const Tensor& x, int64_t dim, bool keepdim) {
  return record(ops::sum(x, dim, keepdim), {x}, "sum_dim", [shape = x.shape(), dim, keepdim](const Tensor& g) {
    return Grads{ops::expand_reduced(g, shape, dim, keepdim, 1.f)};
  });
}

Tensor mean(const Tensor& x) {
  const float f = 1.f / float(x.numel());
  return record(ops::mean(x), {x}, "mean", [shape = x.shape(), dt = x.dtype(), f](const Tensor& g) {
    return Grads{Tensor::full(shape, g.item() * f, dt)};
  });
}

Tensor mean(const Tensor& x, int64_t dim, bool keepdim) {
  Tensor out = ops::mean(x, dim, keepdim);
  const float f = 1.f / float(x.size(dim));
  return record(out, {x}, "mean_dim", [shape = x.shape(), dim, keepdim, f](const Tensor& g) {
    return Grads{ops::expand_reduced(g, shape, dim, keepdim, f)};
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

Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index) {
  auto saved = std::make_shared<ops::CrossEntropyResult>(ops::cross_entropy(logits, targets, ignore_index));
  Tensor loss = saved->loss;
  saved->loss = Tensor();  // the node must not own its own output (reference cycle)
  return record(loss, {logits, targets}, "cross_entropy",
                [saved, targets, ignore_index, dt = logits.dtype()](const Tensor& g) {
                  return Grads{ops::cross_entropy_backward(g.item(), *saved, targets, ignore_index, dt), Tensor()};
                });
}

}  // namespace zt::ag
