#include "grad_blocks.h"

#include <algorithm>
#include <optional>

#include "zt/autograd/autograd.h"
#include "zt/core/error.h"
#include "zt/ops/ops.h"

namespace zt::zero {

namespace {

// Elements [w0, w0 + dst.numel()) of the gradient's flat order into dst (zeros where that runs
// before or past the parameter: the buffer's padding), made as whole rows into tmp first.
void fill_window(Tensor dst, int64_t w0, const Tensor& grad, Tensor& tmp) {
  const int64_t e = dst.numel(), numel = grad.numel(), rows = grad.dim() > 0 ? grad.size(0) : 1;
  const int64_t c = numel / rows;
  const int64_t a = std::clamp<int64_t>(w0, 0, numel), b = std::clamp<int64_t>(w0 + e, 0, numel);
  if (a >= b) {
    dst.zero_();
    return;
  }
  if (a > w0) dst.slice(0, 0, a - w0).zero_();
  if (w0 + e > b) dst.slice(0, b - w0, e).zero_();
  for (int64_t p = a; p < b;) {
    const int64_t r0 = p / c, r1 = std::min((b + c - 1) / c, r0 + tmp.size(0)), q = std::min(b, r1 * c);
    Tensor made = tmp.slice(0, 0, r1 - r0);
    autograd::write_grad_rows(grad, made, r0);
    Tensor to = dst.slice(0, p - w0, q - w0);
    ops::cast_into(to, made.view({(r1 - r0) * c}).slice(0, p - r0 * c, q - r0 * c));
    p = q;
  }
}

struct Round {
  comm::WorkPtr work;
  Tensor in, out;
  int64_t at = 0;  // its first element in this rank's shard
};

}  // namespace

void reduce_in_blocks(comm::Group& group, const Tensor& grad, const BufferPlan& layout, DType wire, Tensor& shard,
                      bool write, const std::string& label, CommOverlap& overlap) {
  const int64_t N = group.size(), S = layout.padded / N, E = layout.block_elems, offset = layout.params.at(0).offset;
  ZT_CHECK(layout.params.size() == 1 && E > 0 && grad.numel() == layout.numel && shard.numel() == S,
           "[zero] a gradient of ", grad.numel(), " elements reduced in blocks of ", E, " for a buffer of ",
           layout.numel, " (shard ", shard.numel(), " of ", S, ")");
  const int64_t rows = grad.dim() > 0 ? grad.size(0) : 1, c = grad.numel() / rows;
  // The rounds and the temporary are the reduction's (comm); a row gradient's own work is its producer's.
  const Device dev = shard.device();
  Tensor tmp = Tensor::empty({std::min(rows, (E + c - 1) / c + 1), c}, grad.dtype(), MemTag::comm, dev);
  std::optional<Round> last;
  auto land = [&](Round& r) {
    TagScope tag(MemTag::comm);
    r.work->wait();
    overlap.add(*r.work);
    Tensor dst = shard.slice(0, r.at, r.at + r.out.numel());
    if (write)
      ops::cast_into(dst, r.out);  // 0 + avg rounded once (Note [stale gradient slots])
    else
      ops::axpy_(dst, 1.f, r.out);
  };
  for (int64_t at = 0; at < S; at += E) {
    const int64_t n = std::min(E, S - at);
    Round r{nullptr, Tensor::empty({N * n}, wire, MemTag::comm, dev), Tensor::empty({n}, wire, MemTag::comm, dev), at};
    for (int64_t k = 0; k < N; ++k) fill_window(r.in.slice(0, k * n, (k + 1) * n), k * S + at - offset, grad, tmp);
    comm::CollOptions o;
    o.op = comm::ReduceOp::avg;
    o.label = label + ", block " + std::to_string(at / E);
    {
      TagScope tag(MemTag::comm);
      r.work = group.reduce_scatter_async(r.in, r.out, o);
    }
    if (last) land(*last);
    last = std::move(r);
  }
  if (last) land(*last);
}

}  // namespace zt::zero
