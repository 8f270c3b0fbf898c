// Differentiable transformer layer ops (embedding, dropout, select): each calls its kernel in
// zt/ops/transformer.h and records the matching backward. Attention and the norms have their own files.
#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "zt/autograd/autograd.h"
#include "zt/autograd/layers.h"
#include "zt/ops/transformer.h"

namespace zt::ag {

using autograd::record;
using Grads = std::vector<Tensor>;

namespace {
// The positions of each id in ascending order, read from the ids once per backward.
struct RowsByPosition {
  std::vector<int32_t> ids, positions;  // sorted by (id, position)
};

// Rows [row0, row0 + dst.size(0)) of an embedding's gradient alone (Note [gradient blocks]): the
// positions whose ids fall there, gathered from dy and summed as embedding_backward_add does
// (position order, in f32), so each row is the value the whole gradient would hold.
void embedding_rows(RowsByPosition& by, const Tensor& g, const Tensor& ids, DType dt, Tensor& dst, int64_t row0) {
  if (by.ids.empty() && ids.numel() > 0) {
    const Tensor host = ids.contiguous().to(Device::cpu());
    const int32_t* p = host.data<int32_t>();
    std::vector<std::pair<int32_t, int32_t>> pairs;
    for (int64_t i = 0; i < host.numel(); ++i) pairs.emplace_back(p[i], int32_t(i));
    std::sort(pairs.begin(), pairs.end());
    for (auto& [id, pos] : pairs) by.ids.push_back(id), by.positions.push_back(pos);
  }
  dst.zero_();
  const auto lo = std::lower_bound(by.ids.begin(), by.ids.end(), int32_t(row0));
  const auto hi = std::lower_bound(by.ids.begin(), by.ids.end(), int32_t(row0 + dst.size(0)));
  if (lo == hi) return;
  const size_t a = size_t(lo - by.ids.begin()), b = size_t(hi - by.ids.begin());
  std::vector<int32_t> local(by.ids.begin() + a, by.ids.begin() + b);
  for (int32_t& id : local) id -= int32_t(row0);
  const std::vector<int32_t> pos(by.positions.begin() + a, by.positions.begin() + b);
  const int64_t m = int64_t(b - a), c = dst.size(1);
  const Tensor dy = g.contiguous().view({g.numel() / c, c});
  const Tensor picked = ops::embedding(dy, Tensor::from_ints(pos, {m}, g.device()));
  ops::embedding_backward_add(picked, Tensor::from_ints(local, {m}, g.device()), dt, dst);
}
}  // namespace

// The backward reads only V and the dtype of the weight (its values may be released by then);
// a sparse weight also learns which rows this use touched. The gradient adds its rows into the
// weight's (Note [row gradients]): the touched rows' work, not [V, C]'s.
Tensor embedding(const Tensor& weight, const Tensor& ids) {
  Tensor out = ops::embedding(weight, ids);
  return record(out, {weight, ids}, "embedding", [weight, ids](const Tensor& g) {
    const int64_t v = weight.size(0);
    if (autograd::sparse_grad(weight)) autograd::add_touched_rows(weight, ops::touched_rows(ids, v));
    const DType dt = weight.dtype();
    return Grads{autograd::adding_grad(
                     weight.shape(), dt, g.device(),
                     [g, ids, dt](Tensor& slot, bool zeroed) {
                       if (zeroed) slot.zero_();  // rows only: the rest must read 0
                       ops::embedding_backward_add(g, ids, dt, slot);
                     },
                     [g, ids, dt, rows = std::make_shared<RowsByPosition>()](Tensor& dst, int64_t row0) {
                       embedding_rows(*rows, g, ids, dt, dst, row0);
                     }),
                 Tensor()};
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
