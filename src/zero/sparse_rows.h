#pragma once
// Note [sparse rows]: with sparse_gradients an embedding weight [V, C] that has a buffer of its
// own is reduced as (row id, row) pairs: ranks agree on the most rows any of them touched (K),
// all-gather their ids (padded with -1) and rows [K, C] in the wire dtype, and every rank sums
// the gathered rows in rank order in fp32 and divides by the world size, as the dense average
// does. The result equals the dense reduction; it moves world*K*(C+1) elements instead of V*C.
#include <cstdint>
#include <vector>

#include "wire.h"
#include "zt/core/tensor.h"
#include "zt/zero/layout.h"

namespace zt::zero {

struct PackedRows {
  Tensor ids;   // i32 [max_rows], -1 past rows.size()
  Tensor rows;  // wire dtype [max_rows * C], zeros past rows.size()
};

// The touched rows of a [V, C] parameter whose gradient starts at `offset` of the flat `full`.
PackedRows pack_rows(const Tensor& full, int64_t offset, int64_t V, int64_t C, const std::vector<int32_t>& rows,
                     int64_t max_rows, DType wire);

// The average over `world` ranks of the gathered rows (ids [world*K], rows [world*K*C]), over
// the range `dst` of the flat buffer, in `out_dtype`; positions no row covers are zero.
Tensor average_rows(const Tensor& ids, const Tensor& rows, int64_t offset, int64_t V, int64_t C, Range dst, int world,
                    DType out_dtype);

// The sparse-rows wire format (Note [wire formats]) of one [V, C] parameter `param` whose
// gradient starts at `offset` of its buffer (`padded` elements): launch() takes the buffer's
// full gradient and clears the parameter's touched rows; finish() gives the average over the
// whole buffer (shard false) or this rank's shard, in `wire`. `bytes` counts what moved.
std::unique_ptr<WireEncoder> make_sparse_rows_encoder(comm::Group& group, Tensor param, int64_t offset,
                                                      int64_t padded, bool shard, DType wire, SparseCommBytes& bytes);

}  // namespace zt::zero
