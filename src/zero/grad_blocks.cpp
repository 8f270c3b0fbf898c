#include "grad_blocks.h"

#include <algorithm>
#include <optional>

#include "zt/autograd/autograd.h"
#include "zt/core/error.h"
#include "zt/ops/ops.h"

namespace zt::zero {

namespace {

// One gradient to send: its slot in the buffer, and the temporary its whole rows are made in.
struct Source {
  Tensor grad, tmp;
  int64_t offset = 0, row = 1;
};

// Elements [w0, w0 + dst.numel()) of the buffer into dst: each source's elements there (sources
// in buffer order), made as whole rows into its temporary first; zeros in the gaps (another
// slot, the padding), so each element is written once.
void fill_window(Tensor dst, int64_t w0, std::vector<Source>& sources) {
  const int64_t e = dst.numel();
  int64_t covered = 0;  // dst's elements [0, covered) are written
  for (Source& s : sources) {
    const int64_t numel = s.grad.numel(), c = s.row;
    const int64_t a = std::clamp<int64_t>(w0 - s.offset, 0, numel),
                  b = std::clamp<int64_t>(w0 + e - s.offset, 0, numel);
    if (a >= b) continue;
    if (s.offset + a - w0 > covered) dst.slice(0, covered, s.offset + a - w0).zero_();
    for (int64_t p = a; p < b;) {
      const int64_t r0 = p / c, r1 = std::min((b + c - 1) / c, r0 + s.tmp.size(0)), q = std::min(b, r1 * c);
      Tensor made = s.tmp.slice(0, 0, r1 - r0);
      autograd::write_grad_rows(s.grad, made, r0);
      Tensor to = dst.slice(0, s.offset + p - w0, s.offset + q - w0);
      ops::cast_into(to, made.view({(r1 - r0) * c}).slice(0, p - r0 * c, q - r0 * c));
      p = q;
    }
    covered = s.offset + b - w0;
  }
  if (covered < e) dst.slice(0, covered, e).zero_();
}

struct Round {
  comm::WorkPtr work;
  Tensor in, out;
  int64_t at = 0;  // its first element in this rank's shard
};

}  // namespace

int64_t block_rounds(const BufferPlan& layout, int world) {
  const int64_t S = layout.padded / world, E = layout.block_elems;
  return E > 0 ? (S + E - 1) / E : 0;
}

int64_t block_rows_elems(int64_t numel, int64_t row, int64_t block) {
  return std::min(numel / row, (block + row - 1) / row + 1) * row;
}

void reduce_in_blocks(comm::Group& group, const std::vector<SlotGrad>& grads, const BufferPlan& layout, DType wire,
                      Tensor& shard, std::vector<bool>& stale, const std::string& label, CommOverlap& overlap) {
  const int64_t N = group.size(), S = layout.padded / N, E = layout.block_elems;
  ZT_CHECK(E > 0 && shard.numel() == S && int64_t(stale.size()) == block_rounds(layout, int(N)), "[zero] blocks of ", E,
           " for a shard of ", shard.numel(), " (", S, " planned, ", stale.size(), " rounds)");
  // The rounds and the temporaries are the reduction's (comm); a row gradient's own work is its producer's.
  const Device dev = shard.device();
  std::vector<Source> sources;
  for (const auto& [slot, g] : grads) {
    const ParamSlot& p = layout.params.at(slot);
    ZT_CHECK(g.numel() == p.numel, "[zero] a gradient of ", g.numel(), " elements for a slot of ", p.numel);
    const int64_t row = g.dim() > 0 && g.size(0) > 0 ? g.numel() / g.size(0) : g.numel();
    Tensor tmp = Tensor::empty({block_rows_elems(g.numel(), row, E) / row, row}, g.dtype(), MemTag::comm, dev);
    sources.push_back({g, std::move(tmp), p.offset, row});
  }
  std::sort(sources.begin(), sources.end(), [](const Source& x, const Source& y) { return x.offset < y.offset; });
  std::optional<Round> last;
  auto land = [&](Round& r) {
    TagScope tag(MemTag::comm);
    r.work->wait();
    overlap.add(*r.work);
    Tensor dst = shard.slice(0, r.at, r.at + r.out.numel());
    const size_t j = size_t(r.at / E);
    if (stale[j])
      ops::cast_into(dst, r.out);  // 0 + avg rounded once (Note [stale gradient slots])
    else
      ops::axpy_(dst, 1.f, r.out);
    stale[j] = false;
  };
  for (int64_t at = 0; at < S; at += E) {
    const int64_t n = std::min(E, S - at);
    bool touched = false;  // rounds holding none of these gradients' elements are left out
    for (int64_t k = 0; k < N; ++k)
      for (const Source& s : sources)
        touched = touched || intersect({k * S + at, k * S + at + n}, {s.offset, s.offset + s.grad.numel()}).size() > 0;
    if (!touched) continue;
    Round r{nullptr, Tensor::empty({N * n}, wire, MemTag::comm, dev), Tensor::empty({n}, wire, MemTag::comm, dev), at};
    for (int64_t k = 0; k < N; ++k) fill_window(r.in.slice(0, k * n, (k + 1) * n), k * S + at, sources);
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
