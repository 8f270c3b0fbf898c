#pragma once
// This rank's optimizer shard of every flat buffer: the fp32 master weights (16-bit runs) and
// the optimizer states over plan.optim_range, updated by optim's stateless kernels.
#include <string>
#include <utility>
#include <vector>

#include "zt/core/tensor.h"
#include "zt/optim/optimizer.h"
#include "zt/zero/plan.h"

namespace zt::zero {

class OptimShard {
 public:
  // `initial(b)` gives this rank's working parameters of buffer b (the master starts from them).
  OptimShard(const Plan& plan, const optim::OptimizerSpec& spec, int rank, const std::vector<Tensor>& initial);

  // One update of buffer b: params and grads are this rank's range, any float dtypes.
  void update(size_t b, const Tensor& params, const Tensor& grads, float lr, float grad_scale);
  void finish_step() { ++steps_; }
  void set_steps(int64_t s) { steps_ = s; }
  int64_t steps() const { return steps_; }
  // Named tensors of buffer b: "master" (16-bit runs) then the optimizer's states.
  std::vector<std::pair<std::string, Tensor>> state(size_t b) const;

 private:
  struct Buf {
    Tensor master;
    std::vector<Tensor> states;
  };
  optim::OptimizerSpec spec_;
  std::vector<std::string> names_;
  std::vector<Buf> bufs_;
  int64_t steps_ = 0;
};

}  // namespace zt::zero
