#pragma once
// Shard arithmetic, as pure functions (Note [flat buffers]): parameters are packed into flat
// buffers; a buffer of `numel` elements is padded to a multiple of world*kAlignElems, and rank
// r owns [r*S, (r+1)*S) with S = padded/world. A parameter may straddle two or more ranks.
#include <cstdint>
#include <string>
#include <vector>

namespace zt::zero {

constexpr int64_t kAlignElems = 16;  // 64 bytes of fp32: every shard starts cache-aligned

int64_t padded_size(int64_t numel, int world, int64_t align = kAlignElems);

struct Range {
  int64_t begin = 0, end = 0;
  int64_t size() const { return end - begin; }
  bool empty() const { return end <= begin; }
};
Range shard_range(int64_t padded, int world, int rank);
Range intersect(Range a, Range b);

struct ParamSlot {
  size_t index;           // position in the model's parameter list
  int64_t offset, numel;  // range inside the buffer
};

struct BufferPlan {
  std::vector<ParamSlot> params;  // in forward (registration) order
  int64_t numel = 0, padded = 0;
  // One [V, C] parameter whose gradient travels as the rows its uses touched (sparse_gradients).
  bool sparse = false;
  // One tied [V, C] embedding weight (stages 0-2, sparse_gradients): its other uses' gradient is
  // reduced as soon as it is complete, the embedding's rows at the end (Note [tied rows]).
  bool tied_rows = false;
  // Holds a parameter several modules use: its gradient starts early in backward (PlanInput::shared).
  bool shared = false;
  // Note [gradient blocks]: stages 2-3, a buffer whose first parameter is larger than
  // reduce_bucket_size: its gradients are made and reduce-scattered in rounds of this many elements
  // per rank (0: whole), each made as whole rows into temporaries of block_rows_elems in all.
  int64_t block_elems = 0, block_rows_elems = 0;
};

// Note [gradient blocks]: rounds of buffer `layout` at this world size (0: not in blocks).
int64_t block_rounds(const BufferPlan& layout, int world);

// Stages 0-2: buckets of at most `bucket_elems` elements, formed from the last parameter
// backwards (the order backward finishes them); a larger parameter gets a bucket of its own,
// and so does every parameter with solo[i] set (the bucket before it is closed).
std::vector<BufferPlan> plan_buckets(const std::vector<int64_t>& param_numels, int64_t bucket_elems, int world,
                                     const std::vector<bool>& solo = {});
// Stage 3: one buffer per unit; units[u] lists parameter indices in order.
std::vector<BufferPlan> plan_units(const std::vector<int64_t>& param_numels,
                                   const std::vector<std::vector<size_t>>& units, int world);

}  // namespace zt::zero
