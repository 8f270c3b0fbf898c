#pragma once
// Internal to the shm backend: the element-wise reduction over every rank's contribution.
#include <cstdint>

#include "zt/comm/group.h"

namespace zt::comm::detail {

// out[i] = op over src[0][i], ..., src[nsrc-1][i], always in that order, so every rank computes
// bit-identical results. Floating dtypes accumulate in fp32 and round once (16-bit); avg
// divides the fp32 sum by nsrc first; max lets NaN win (as torch.max). Integers wrap (sum).
// out may be one of the sources (same address); out2, when not null, receives a copy.
void reduce_elems(DType d, ReduceOp op, const void* const* src, int nsrc, void* out, void* out2, int64_t n);

}  // namespace zt::comm::detail
