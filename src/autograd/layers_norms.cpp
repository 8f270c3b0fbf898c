// Differentiable norms (layer norm, RMSNorm), alone or fused with the residual add before them
// (Note [fused residual norms] in zt/ops/transformer.h): the add's node and the norm's node are
// those of ag::add and the plain norm, so only the passes change, never the values.
#include <memory>
#include <utility>
#include <vector>

#include "zt/autograd/autograd.h"
#include "zt/autograd/layers.h"
#include "zt/ops/ops.h"
#include "zt/ops/transformer.h"

namespace zt::ag {

using autograd::record;
using Grads = std::vector<Tensor>;

namespace {

// Where a norm's backward adds dx in place: the gradient the residual path has accumulated for x
// already, when it is contiguous in x's shape and dtype; else nullptr (dx is returned).
Tensor* residual_slot(const Tensor& x) {
  Tensor* slot = autograd::accumulated_grad(x);
  return slot && slot->dtype() == x.dtype() && slot->shape() == x.shape() && slot->is_contiguous() ? slot : nullptr;
}

// A fused forward's sum = x + r, recorded as ag::add records it.
Tensor record_sum(Tensor sum, const Tensor& x, const Tensor& r) {
  const bool gx = autograd::requires_grad(x), gr = autograd::requires_grad(r);
  return record(std::move(sum), {x, r}, "add", [s = x.shape(), gx, gr](const Tensor& g) {
    ops::BinaryGrads d = ops::add_backward(g, s, s, gx, gr);
    return Grads{std::move(d.da), std::move(d.db)};
  });
}

Tensor record_layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                         std::shared_ptr<ops::LayerNormResult> saved) {
  Tensor y = std::move(saved->y);
  saved->sum = Tensor();  // backward needs only mean and rstd; the node must not own its output
  return record(y, {x, gamma, beta}, "layer_norm", [x, gamma, saved](const Tensor& g) {
    Tensor* slot = residual_slot(x);
    ops::LayerNormGrads r = ops::layer_norm_backward(g, x, gamma, *saved, slot, /*accumulate=*/slot != nullptr);
    return Grads{std::move(r.dx), std::move(r.dgamma), std::move(r.dbeta)};
  });
}

Tensor record_rms_norm(const Tensor& x, const Tensor& gamma, std::shared_ptr<ops::RmsNormResult> saved) {
  Tensor y = std::move(saved->y);
  saved->sum = Tensor();  // backward needs only rstd
  return record(y, {x, gamma}, "rms_norm", [x, gamma, saved](const Tensor& g) {
    Tensor* slot = residual_slot(x);
    ops::RmsNormGrads r = ops::rms_norm_backward(g, x, gamma, *saved, slot, /*accumulate=*/slot != nullptr);
    return Grads{std::move(r.dx), std::move(r.dgamma)};
  });
}

}  // namespace

Tensor layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, float eps) {
  return record_layer_norm(x, gamma, beta, std::make_shared<ops::LayerNormResult>(ops::layer_norm(x, gamma, beta, eps)));
}

AddNorm add_layer_norm(const Tensor& x, const Tensor& r, const Tensor& gamma, const Tensor& beta, float eps) {
  auto saved = std::make_shared<ops::LayerNormResult>(ops::layer_norm(x, gamma, beta, eps, &r));
  Tensor sum = record_sum(saved->sum, x, r);
  return {sum, record_layer_norm(sum, gamma, beta, std::move(saved))};
}

Tensor rms_norm(const Tensor& x, const Tensor& gamma, float eps) {
  return record_rms_norm(x, gamma, std::make_shared<ops::RmsNormResult>(ops::rms_norm(x, gamma, eps)));
}

AddNorm add_rms_norm(const Tensor& x, const Tensor& r, const Tensor& gamma, float eps) {
  auto saved = std::make_shared<ops::RmsNormResult>(ops::rms_norm(x, gamma, eps, &r));
  Tensor sum = record_sum(saved->sum, x, r);
  return {sum, record_rms_norm(sum, gamma, std::move(saved))};
}

}  // namespace zt::ag
