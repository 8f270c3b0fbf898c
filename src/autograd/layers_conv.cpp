// Differentiable convolution and max pooling (zt/autograd/layers.h) over the kernels in
// zt/ops/conv.h. Pooling keeps only its argmax for backward, not its output.
#include <memory>
#include <vector>

#include "zt/autograd/autograd.h"
#include "zt/autograd/layers.h"
#include "zt/ops/conv.h"

namespace zt::ag {

using autograd::record;
using autograd::requires_grad;

Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor* b, int64_t stride, int64_t padding) {
  const ops::Conv2dParams p{stride, padding};
  Tensor y = ops::conv2d(x, w, b, p);
  const bool gx = requires_grad(x), gw = requires_grad(w), gb = b && requires_grad(*b);
  std::vector<Tensor> inputs{x, w};
  if (b) inputs.push_back(*b);
  const size_t n = inputs.size();
  return record(y, std::move(inputs), "conv2d", [x, w, p, gx, gw, gb, n](const Tensor& g) {
    std::vector<Tensor> r(n);
    if (!gx && !gw && !gb) return r;
    // oneDNN computes the weight and bias gradients in one pass, so both come together.
    ops::Conv2dGrads cg = ops::conv2d_backward(g, x, w, p, gx, gb);
    r[0] = std::move(cg.dx);
    if (gw) r[1] = std::move(cg.dw);
    if (gb) r[2] = std::move(cg.db);
    return r;
  });
}

Tensor max_pool2d(const Tensor& x, int64_t k, int64_t s) {
  auto saved = std::make_shared<ops::MaxPoolResult>(ops::max_pool2d(x, k, s));
  Tensor y = saved->y;
  saved->y = Tensor();  // the node must not own its own output (reference cycle), nor need it
  return record(y, {x}, "max_pool2d", [saved, shape = x.shape()](const Tensor& g) {
    return std::vector<Tensor>{ops::max_pool2d_backward(g, *saved, shape)};
  });
}

}  // namespace zt::ag
