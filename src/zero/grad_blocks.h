#pragma once
// Note [gradient blocks]: at stages 2-3 a parameter larger than reduce_bucket_size (GPT's tied
// wte, a wide MLP layer) never has its whole gradient on a rank. Each use's gradient, a row
// gradient that can make any range of its rows (Note [row gradients]), is reduce-scattered as
// backward makes it, in rounds: round j holds for every rank k elements [jE, (j+1)E) of k's shard
// range, made a few whole rows at a time into one temporary; each rank receives its own piece,
// averaged in the wire dtype, and adds it into its gradient shard. One round reduces while the
// next is made. What a use holds is gradient_block_bytes (schedule.h), which the peak predictor
// counts at each use; a tied weight's uses (the output projection first, the embedding last) are
// reduced one after the other, so its gradient travels once per use.
#include <string>
#include <vector>

#include "zt/comm/group.h"
#include "zt/core/tensor.h"
#include "zt/zero/engine_options.h"
#include "zt/zero/layout.h"

namespace zt::zero {

// Elements of the whole rows a piece of `block` elements of a parameter with rows of `row` needs.
int64_t block_rows_elems(int64_t numel, int64_t row, int64_t block);

struct SlotGrad {
  size_t slot;  // in layout.params
  Tensor grad;  // one use's gradient of that parameter
};
// Averages `grads` over `group` in the rounds that hold their elements and adds this rank's part
// into `shard` (its shard range of the buffer). A round whose `stale` flag is set is written, not
// added, and the flag cleared.
void reduce_in_blocks(comm::Group& group, const std::vector<SlotGrad>& grads, const BufferPlan& layout, DType wire,
                      Tensor& shard, std::vector<bool>& stale, const std::string& label, CommOverlap& overlap);

}  // namespace zt::zero
