#include "sparse_rows.h"

#include <functional>

#include "zt/autograd/autograd.h"
#include "zt/core/error.h"
#include "zt/ops/ops.h"

namespace zt::zero {

PackedRows pack_rows(const Tensor& full, int64_t offset, int64_t V, int64_t C, const std::vector<int32_t>& rows,
                     int64_t max_rows, DType wire) {
  ZT_CHECK(int64_t(rows.size()) <= max_rows, "[zero] ", rows.size(), " touched rows exceed the agreed ", max_rows);
  PackedRows p;
  p.ids = Tensor::from_ints(std::vector<int32_t>(size_t(max_rows), -1), {max_rows});
  p.rows = Tensor::zeros({max_rows * C}, wire);
  int32_t* ids = p.ids.data<int32_t>();
  for (size_t j = 0; j < rows.size(); ++j) {
    const int64_t id = rows[j];
    ZT_CHECK(id >= 0 && id < V, "[zero] touched row ", id, " outside the embedding's ", V, " rows");
    ids[j] = int32_t(id);
    Tensor dst = p.rows.slice(0, int64_t(j) * C, int64_t(j + 1) * C);
    ops::cast_into(dst, full.slice(0, offset + id * C, offset + (id + 1) * C));
  }
  return p;
}

Tensor average_rows(const Tensor& ids, const Tensor& rows, int64_t offset, int64_t V, int64_t C, Range dst, int world,
                    DType out_dtype) {
  Tensor acc = Tensor::zeros({dst.size()}, DType::f32);
  const Tensor vals = rows.dtype() == DType::f32 ? rows : ops::cast(rows, DType::f32);
  const int32_t* id = ids.data<int32_t>();
  const float* v = vals.data<float>();
  float* a = acc.data<float>();
  for (int64_t i = 0; i < ids.numel(); ++i) {  // rank-major: each element sums in rank order
    if (id[i] < 0) continue;
    ZT_CHECK(id[i] < V, "[zero] a peer sent row ", id[i], " of an embedding with ", V, " rows");
    const Range row{offset + id[i] * C, offset + (id[i] + 1) * C};
    const Range x = intersect(row, dst);
    for (int64_t e = x.begin; e < x.end; ++e) a[e - dst.begin] += v[i * C + (e - row.begin)];
  }
  const float n = float(world);  // as comm's avg: an fp32 division, then one rounding
  for (int64_t e = 0; e < dst.size(); ++e) a[e] /= n;
  return out_dtype == DType::f32 ? acc : ops::cast(acc, out_dtype);
}

namespace {

class SparseTransfer : public Transfer {
 public:
  SparseTransfer(comm::WorkPtr ids_work, comm::WorkPtr rows_work, Tensor ids, Tensor rows, Tensor ids_all,
                 Tensor rows_all, std::function<Tensor(const Tensor&, const Tensor&)> average)
      : works_{std::move(ids_work), std::move(rows_work)},
        keep_{std::move(ids), std::move(rows)},
        ids_all_(std::move(ids_all)),
        rows_all_(std::move(rows_all)),
        average_(std::move(average)) {}
  Tensor finish(CommOverlap& overlap) override {
    for (const comm::WorkPtr& w : works_)
      if (w) {
        w->wait();
        overlap.add(*w);
      }
    TagScope tag(MemTag::comm);
    return average_(ids_all_, rows_all_);
  }

 private:
  comm::WorkPtr works_[2];
  Tensor keep_[2];
  Tensor ids_all_, rows_all_;
  std::function<Tensor(const Tensor&, const Tensor&)> average_;
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
    Tensor k = Tensor::from_ints({int32_t(rows.size())}, {1});
    group_.all_reduce(k, comm::CollOptions(comm::ReduceOp::max, o.label + ", sparse row count"));
    const int64_t K = k.data<int32_t>()[0];
    PackedRows packed = pack_rows(full, offset_, V, C, rows, K, wire_);
    autograd::clear_touched_rows(param_);  // the next window starts empty
    Tensor ids_all = Tensor::empty({N * K}, DType::i32), rows_all = Tensor::empty({N * K * C}, wire_);
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
    return std::make_unique<SparseTransfer>(ids_work, rows_work, packed.ids, packed.rows, ids_all, rows_all, average);
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
