#pragma once
// Working parameters of every flat buffer: full on every rank (stages 0-2) or a shard that is
// all-gathered on demand (stage 3). Model parameters are views into the full buffer while it
// exists, and have no storage while a stage-3 unit is released.
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "zt/comm/group.h"
#include "zt/core/tensor.h"
#include "zt/zero/engine.h"
#include "zt/zero/plan.h"

namespace zt::zero {

struct PrefetchLimits {
  int64_t prefetch_elems = 50'000'000;     // stage3_prefetch_bucket_size
  int64_t max_live_elems = 1'000'000'000;  // stage3_max_live_parameters
};

class ParamStore {
 public:
  // Fills the f32 values of a parameter that has no storage yet (Note [deferred init] in nn).
  using Materialize = std::function<void(const Tensor& param, Tensor& values)>;

  // `params` in model order; their current values, or for deferred ones what `materialize`
  // gives, become the initial parameters, written straight into the flat layout (stage 3: one
  // unit at a time, so construction holds one unit beyond the shards).
  ParamStore(const Plan& plan, std::vector<Tensor> params, comm::Group& group, PrefetchLimits limits,
             const Materialize& materialize);

  // This rank's working parameters of buffer b over plan.optim_range (the optimizer writes here).
  Tensor owned(size_t b) const;
  // After the optimizer wrote owned(b): stages 1-2 all-gather it into the full buffer, a
  // persistent stage-3 unit refreshes its gathered copy.
  void publish(size_t b, const std::string& label);

  bool gathered(size_t b) const { return bufs_[b].full.defined(); }
  void gather(size_t b, bool wait, const std::string& label);  // stage 3
  void release(size_t b);                                      // stage 3; persistent units stay
  void prefetch(size_t b, int dir, const std::string& label);  // gathers units after (+1) or before (-1) b

  CommOverlap take_overlap() { return std::exchange(overlap_, {}); }  // all-gathers waited for since

 private:
  CommOverlap overlap_;
  struct Buf {
    Range own;
    Tensor full;   // padded, working dtype (stages 0-2 always; stage 3 while gathered)
    Tensor shard;  // stage 3: this rank's slice
    comm::WorkPtr gather_work;
  };
  void bind(size_t b);
  void unbind(size_t b);
  void write_initial(size_t index, Tensor dst, const Materialize& materialize) const;

  const Plan& plan_;
  std::vector<Tensor> params_;
  comm::Group& group_;
  PrefetchLimits limits_;
  std::vector<Buf> bufs_;
};

}  // namespace zt::zero
