#include "sparse_rows.h"

#include <functional>

#include "zt/autograd/autograd.h"
#include "zt/core/error.h"
#include "zt/ops/compress.h"
#include "zt/ops/ops.h"
#include "zt/ops/transformer.h"

namespace zt::zero {

PackedRows pack_rows(const Tensor& full, int64_t offset, int64_t V, int64_t C, const std::vector<int32_t>& rows,
                     int64_t max_rows, DType wire) {
  const int64_t n = int64_t(rows.size());
  ZT_CHECK(n <= max_rows, "[zero] ", n, " touched rows exceed the agreed ", max_rows);
  std::vector<int32_t> ids(size_t(max_rows), -1);
  for (int64_t j = 0; j < n; ++j) {
    ZT_CHECK(rows[size_t(j)] >= 0 && rows[size_t(j)] < V, "[zero] touched row ", rows[size_t(j)],
             " outside the embedding's ", V, " rows");
    ids[size_t(j)] = rows[size_t(j)];
  }
  PackedRows p;
  p.ids = Tensor::from_ints(ids, {max_rows}, full.device());
  p.rows = Tensor::zeros({max_rows * C}, wire, full.device());
  if (n > 0) {  // the rows gathered as an embedding lookup of the gradient, on its device
    const Tensor grad = full.slice(0, offset, offset + V * C).view({V, C});
    const Tensor got = ops::embedding(grad, p.ids.slice(0, 0, n));
    Tensor dst = p.rows.slice(0, 0, n * C);
    ops::cast_into(dst, got.view({n * C}));
  }
  return p;
}

Tensor average_rows(const Tensor& ids, const Tensor& rows, int64_t offset, int64_t V, int64_t C, Range dst, int world,
                    DType out_dtype) {
  Tensor acc = Tensor::empty({dst.size()}, DType::f32, rows.device());
  const Tensor vals = rows.dtype() == DType::f32 ? rows : ops::cast(rows, DType::f32);
  ops::average_rows_into(ids, vals, offset, V, C, dst.begin, float(world), acc);
  return out_dtype == DType::f32 ? acc : ops::cast(acc, out_dtype);
}

namespace {

class SparseTransfer : public Transfer {
 public:
  using Average = std::function<Tensor(const Tensor&, const Tensor&)>;
  using AddAverage = std::function<void(const Tensor&, const Tensor&, Tensor)>;
  SparseTransfer(comm::WorkPtr ids_work, comm::WorkPtr rows_work, Tensor ids, Tensor rows, Tensor ids_all,
                 Tensor rows_all, Average average, AddAverage add_average)
      : works_{std::move(ids_work), std::move(rows_work)},
        keep_{std::move(ids), std::move(rows)},
        ids_all_(std::move(ids_all)),
        rows_all_(std::move(rows_all)),
        average_(std::move(average)),
        add_average_(std::move(add_average)) {}
  Tensor finish(CommOverlap& overlap) override {
    wait(overlap);
    TagScope tag(MemTag::comm);
    return average_(ids_all_, rows_all_);
  }
  void add_to(Tensor dst, CommOverlap& overlap) override {
    wait(overlap);
    TagScope tag(MemTag::comm);
    add_average_(ids_all_, rows_all_, std::move(dst));
  }

 private:
  comm::WorkPtr works_[2];
  Tensor keep_[2];
  Tensor ids_all_, rows_all_;
  Average average_;
  AddAverage add_average_;
  void wait(CommOverlap& overlap) {
    for (const comm::WorkPtr& w : works_)
      if (w) {
        w->wait();
        overlap.add(*w);
      }
  }
};

// Note [sparse rows]: the most rows any rank touched (a blocking max: every rank launches its
// buckets in the same order), then the ids and rows all-gathered; finish sums them.
class SparseRowsEncoder : public WireEncoder {
 public:
  SparseRowsEncoder(comm::Group& g, Tensor param, int64_t offset, int64_t padded, bool shard, DType wire,
                    SparseCommBytes& bytes)
      : group_(g), param_(std::move(param)), offset_(offset), padded_(padded), shard_(shard), wire_(wire), bytes_(bytes) {}

  std::unique_ptr<Transfer> launch(const Tensor& full, const comm::CollOptions& o) override {
    const int64_t V = param_.size(0), C = param_.size(1), N = group_.size();
    const std::vector<int32_t>& rows = autograd::touched_rows(param_);
    Tensor k = Tensor::from_ints({int32_t(rows.size())}, {1}, full.device());
    group_.all_reduce(k, comm::CollOptions(comm::ReduceOp::max, o.label + ", sparse row count"));
    const int64_t K = int64_t(k.item());  // exact: row counts stay far below 2^24
    PackedRows packed = pack_rows(full, offset_, V, C, rows, K, wire_);
    autograd::clear_touched_rows(param_);  // the next window starts empty
    Tensor ids_all = Tensor::empty({N * K}, DType::i32, full.device());
    Tensor rows_all = Tensor::empty({N * K * C}, wire_, full.device());
    comm::WorkPtr ids_work, rows_work;
    if (K > 0) {  // else no rank touched a row: nothing to gather, the average is zero
      ids_work = group_.all_gather_async(packed.ids, ids_all, comm::CollOptions(o.label + ", sparse row ids"));
      rows_work = group_.all_gather_async(packed.rows, rows_all, comm::CollOptions(o.label + ", sparse rows"));
    }
    const int64_t w = int64_t(dtype_size(wire_));
    bytes_.moved += 2 * 4 + (K > 0 ? N * K * (4 + C * w) : 0);
    bytes_.dense_equivalent += (shard_ ? 1 : 2) * padded_ * w;
    const Range dst = shard_ ? shard_range(padded_, int(N), group_.rank()) : Range{0, padded_};
    auto average = [=, this](const Tensor& ids, const Tensor& vals) {
      return average_rows(ids, vals, offset_, V, C, dst, int(N), wire_);
    };
    auto add_average = [=, this](const Tensor& ids, const Tensor& vals, Tensor out) {
      ZT_ASSERT(out.numel() == dst.size(), "sparse rows added into ", out.numel(), " values, not the ", dst.size(),
                " they were reduced for");
      ops::add_average_rows_into(ids, vals.dtype() == DType::f32 ? vals : ops::cast(vals, DType::f32), offset_, V, C,
                                 dst.begin, float(N), wire_, out);
    };
    return std::make_unique<SparseTransfer>(ids_work, rows_work, packed.ids, packed.rows, ids_all, rows_all, average,
                                            add_average);
  }

 private:
  comm::Group& group_;
  Tensor param_;
  int64_t offset_, padded_;
  bool shard_;
  DType wire_;
  SparseCommBytes& bytes_;
};

}  // namespace

std::unique_ptr<WireEncoder> make_sparse_rows_encoder(comm::Group& group, Tensor param, int64_t offset,
                                                      int64_t padded, bool shard, DType wire, SparseCommBytes& bytes) {
  return std::make_unique<SparseRowsEncoder>(group, std::move(param), offset, padded, shard, wire, bytes);
}

}  // namespace zt::zero
