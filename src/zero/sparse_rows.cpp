#include "sparse_rows.h"

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

}  // namespace zt::zero
