#pragma once
// Note [wire formats]: how one gradient buffer travels to its average over the ranks. Three
// encoders behind one interface, chosen per buffer by the reducer:
//   dense:      one all-reduce (stage 0) or reduce-scatter (stages 1-3) in comm_dtype;
//   sparse rows: the rows an embedding's uses touched (Note [sparse rows]);
//   quantized:  ZeRO++'s qgZ (Note [ZeRO++]): full precision inside the node, int4/int8 across.
// launch() starts the exchange of a wire-dtype tensor; the Transfer's finish() waits and returns
// the average over the whole buffer (stage 0) or this rank's shard, in comm_dtype.
//
// Note [ZeRO++]: DeepSpeed's three cuts of stage 3's traffic between nodes (3Ψ per step):
//   qwZ (zero_quantized_weights): a training pass all-gathers each unit's shards as int8 blocks
//       (Note [block quantization]) and every rank decodes the same values, its own slice too;
//       consolidation, evaluation and the refresh after the update gather exactly.
//   hpZ (zero_hpz_partition_size P): when a training pass gathers a unit over all ranks, each rank
//       keeps its 1/P piece of the full unit; a later gather of the unit in the same step (the
//       backward one) is an all-gather among the P consecutive ranks holding those pieces,
//       inside the node when P is the ranks per node. The pieces are dropped at the update.
//   qgZ (zero_quantized_gradients): with L ranks per node and M > 1 nodes, a reduce-scatter
//       averages inside each node (shm, fp32 inside, comm_dtype out), quantizes the M node
//       averages of this rank's column, exchanges them by all-to-all among the M ranks with its
//       local rank, and averages the decoded values in fp32. One quantization per value, not one
//       per hop. On one node there is nothing to cross, and the reduction stays dense.
// Cross-node elements per step become about Ψ/4 (int8 weights, forward) + 0 (backward) + Ψ/8
// (int4 gradients), plus one f32 scale per 256 values.
#include <cstdint>
#include <memory>

#include "zt/comm/group.h"
#include "zt/config/sections.h"
#include "zt/core/tensor.h"
#include "zt/zero/engine_options.h"

namespace zt::zero {

// The engine's groups: every rank, and what ZeRO++ splits from it (null where not used).
struct CommGroups {
  comm::GroupPtr all;
  comm::GroupPtr node;       // qgZ: this node's ranks (L > 1)
  comm::GroupPtr cross;      // qgZ: the ranks with this local rank, one per node (may be `all`)
  comm::GroupPtr secondary;  // hpZ: the P consecutive ranks holding the pieces (may be `node`)
  int local_size = 1;
  uint64_t bytes() const;             // every distinct group's bytes (Note [comm bytes])
  uint64_t cross_node_bytes() const;  // of those, what crossed nodes
};
// Collective over `all`: splits what the wire plan needs (its partition checked by plan_wire).
CommGroups make_comm_groups(comm::GroupPtr all, const WirePlan& wire);

class Transfer {
 public:
  virtual ~Transfer() = default;
  virtual Tensor finish(CommOverlap& overlap) = 0;
  // dst += what finish returns; sparse rows add at the rows' positions only (wire.cpp's default adds it all).
  virtual void add_to(Tensor dst, CommOverlap& overlap);
};

class WireEncoder {
 public:
  virtual ~WireEncoder() = default;
  // `in`: the padded buffer in comm_dtype; alive until finish().
  virtual std::unique_ptr<Transfer> launch(const Tensor& in, const comm::CollOptions& o) = 0;
};

// shard: reduce-scatter (stages 1-3), else all-reduce.
std::unique_ptr<WireEncoder> make_dense_encoder(comm::Group& group, bool shard);
// Needs groups.cross (M > 1 nodes); bits 4 or 8.
std::unique_ptr<WireEncoder> make_quantized_encoder(const CommGroups& groups, int bits);

}  // namespace zt::zero
