// Differentiable transformer layer ops (embedding, layer norm, dropout, select): each calls its
// kernel in zt/ops/transformer.h and records the matching backward. Attention is in its own file.
#include <memory>
#include <vector>

#include "zt/autograd/autograd.h"
#include "zt/autograd/layers.h"
#include "zt/ops/transformer.h"

namespace zt::ag {

using autograd::record;
using Grads = std::vector<Tensor>;

// The backward reads only V and the dtype of the weight (its values may be released by then);
// a sparse weight also learns which rows this use touched. The gradient adds its rows into the
// weight's (Note [row gradients]): the touched rows' work, not [V, C]'s.
Tensor embedding(const Tensor& weight, const Tensor& ids) {
  Tensor out = ops::embedding(weight, ids);
  return record(out, {weight, ids}, "embedding", [weight, ids](const Tensor& g) {
    const int64_t v = weight.size(0);
    if (autograd::sparse_grad(weight)) autograd::add_touched_rows(weight, ops::touched_rows(ids, v));
    const DType dt = weight.dtype();
    return Grads{autograd::adding_grad(weight.shape(), dt, g.device(),
                                       [g, ids, dt](Tensor& slot, bool zeroed) {
                                         if (zeroed) slot.zero_();  // rows only: the rest must read 0
                                         ops::embedding_backward_add(g, ids, dt, slot);
                                       }),
                 Tensor()};
  });
}

Tensor layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps) {
  auto saved = std::make_shared<ops::LayerNormResult>(ops::layer_norm(x, gamma, beta, eps));
  Tensor y = saved->y;
  saved->y = Tensor();  // backward needs only mean and rstd; the node must not own its output
  return record(y, {x, gamma, beta}, "layer_norm", [x, gamma, saved](const Tensor& g) {
    auto r = ops::layer_norm_backward(g, x, gamma, *saved);
    return Grads{std::move(r.dx), std::move(r.dgamma), std::move(r.dbeta)};
  });
}

Tensor dropout(const Tensor& x, float p, uint64_t seed) {
  if (p == 0.f) return x;
  return record(ops::dropout(x, p, seed), {x}, "dropout",
                [p, seed](const Tensor& g) { return Grads{ops::dropout_backward(g, p, seed)}; });
}

Tensor select(const Tensor& x, int64_t dim, int64_t index) {
  ZT_CHECK(x.defined() && x.dim() >= 1, "[select] needs a tensor with at least one dimension");
  const int64_t d = dim < 0 ? dim + x.dim() : dim;
  ZT_CHECK(d >= 0 && d < x.dim(), "[select] dimension ", dim, " is out of range for ", shape_str(x.shape()));
  const int64_t n = x.size(d);
  ZT_CHECK(index >= -n && index < n, "[select] index ", index, " is out of range for dimension ", dim, " of size ", n);
  return record(x.select(d, index).clone(), {x}, "select",
                [shape = x.shape(), dt = x.dtype(), dev = x.device(), d, index](const Tensor& g) {
                  Tensor dx = Tensor::zeros(shape, dt, dev);
                  dx.select(d, index).copy_(g);  // a view into dx: the gradient lands in row `index`
                  return Grads{dx};
                });
}

}  // namespace zt::ag
