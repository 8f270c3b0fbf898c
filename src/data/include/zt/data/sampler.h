#pragma once
// Which items (samples, token windows, records) each rank reads at each step, from a seed.
//
// Note [global batch layout]: a step's global batch is `global` consecutive entries of the
// epoch's order (a permutation of the items from (seed, epoch), data::epoch_order). Micro-batch
// m of rank r is the rows [(m * world + r) * micro, + micro) of it, rank-major inside each
// micro-batch, so every world size that keeps micro * accumulation * world sees the same global
// batch (ZeRO's equivalence with one process). An epoch is n / global steps (the tail is
// dropped); the position in the data is the step alone, so a checkpoint's step resumes it.
#include <cstdint>
#include <string>
#include <vector>

namespace zt::data {

struct BatchLayout {
  int64_t micro = 1;         // rows per micro-batch and rank
  int64_t accumulation = 1;  // micro-batches per step
  int world = 1, rank = 0;
  int64_t global() const { return micro * accumulation * world; }
  // First row of micro-batch m of this rank inside the step's global batch.
  int64_t micro_begin(int64_t m) const { return (m * world + rank) * micro; }
};

class StepSampler {
 public:
  // n items; `what` names them in errors ("training samples"). A global batch larger than n is
  // ErrorKind::config; a bad layout is invalid_argument.
  StepSampler(int64_t n, const BatchLayout& layout, uint64_t seed, bool shuffle, const std::string& what = "items");

  int64_t size() const { return n_; }
  const BatchLayout& layout() const { return layout_; }
  int64_t steps_per_epoch() const { return n_ / layout_.global(); }
  // Item indices of micro-batch m (0 <= m < accumulation) of this rank at `step` (>= 0).
  std::vector<int64_t> micro_batch(int64_t step, int64_t m) const;
  // The whole global batch of `step`, in layout order (what world = 1 sees over its micro-batches).
  std::vector<int64_t> global_batch(int64_t step) const;

 private:
  const std::vector<int64_t>& order_of(int64_t step, int64_t* in_epoch) const;
  int64_t n_;
  BatchLayout layout_;
  uint64_t seed_;
  bool shuffle_;
  mutable int64_t cached_epoch_ = -1;  // the last epoch's order, kept (not thread-safe)
  mutable std::vector<int64_t> order_;
};

}  // namespace zt::data
