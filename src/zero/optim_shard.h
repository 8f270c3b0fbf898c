#pragma once
// This rank's optimizer shard of every flat buffer: the fp32 master weights (16-bit runs) and
// the optimizer states over plan.optim_range, updated by optim's stateless kernels. They live
// where the policy says (Residence; Note [residence]): in the device's memory, in pinned host
// memory beside a device, whose movement is the HostTier's (Note [host residence]), or in one swap
// file per buffer streamed through a few tile buffers (Note [optimizer swap]).
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "host_tier.h"
#include "zt/core/tensor.h"
#include "zt/optim/optimizer.h"
#include "zt/zero/plan.h"
#include "zt/zero/shard_state.h"

namespace zt::zero {

class ShardResidence;
struct TierShared;

class OptimShard {
 public:
  // `initial(b)` gives this rank's working parameters of buffer b (the master starts from them).
  OptimShard(const Plan& plan, const config::OptimizerConfig& spec, int rank,
             const std::function<Tensor(size_t)>& initial);
  ~OptimShard();

  // Note [host update overlap]: a step's update that may start behind its backward, beside a
  // device with the states in pinned host memory (the HostTier's).
  using EarlyStep = HostTier::EarlyStep;
  void begin_step(std::optional<EarlyStep> early) {
    if (host_) host_->begin_step(early);
  }
  // Buffer b's averaged gradient is final (GradReducer's on_final): beside a device it starts
  // coming down into pinned memory on the copy stream while backward goes on (Note [host residence]).
  // `params` is this rank's range of the parameters, as update() takes it.
  void take_gradient(size_t b, const Tensor& params, const Tensor& grads) {
    if (host_) host_->take_gradient(b, params, grads, steps_ + 1);
  }
  // One update of buffer b: params and grads are this rank's range, any float dtypes. Beside a
  // device the updated parameters go up on the copy stream; later compute work waits for them.
  // `widened` (optional, f32 over the same range): written with float(params) in the same pass
  // where the update runs where the parameters are (Note [widened by the update]); says whether it was.
  bool update(size_t b, const Tensor& params, const Tensor& grads, float lr, float grad_scale,
              const Tensor& widened = Tensor());
  void finish_step() {
    ++steps_;
    if (host_) host_->end_step();
  }
  // An fp16 step skipped on overflow, or a step that failed: the updates started behind backward
  // are waited for (a failed job's error dropped: the step's own error is the one said) and undone
  // where they speculated (`params(b)`: buffer b's parameters as update() takes them).
  void discard_step(const std::function<Tensor(size_t)>& params) {
    if (host_) host_->discard_step(params);
  }
  void set_steps(int64_t s) { steps_ = s; }
  int64_t steps() const { return steps_; }
  // Named tensors of buffer b: "master" (16-bit runs) then the optimizer's states.
  std::vector<ShardTensor> state(size_t b);
  SwapStats swap_stats() const;

 private:
  // The update kernel over every tile of buffer b, on `params` and `grads` where its tier is.
  // Returns the kernel's seconds.
  double apply(size_t b, const Tensor& params, const Tensor& grads, float lr, float grad_scale, int64_t step,
               const Tensor& working, const Tensor& widened = Tensor());

  config::OptimizerConfig spec_;
  std::function<Tensor(size_t)> initial_;
  std::vector<std::string> names_;
  std::unique_ptr<TierShared> shared_;  // what the buffers' tier shares on this rank (swap tile buffers)
  std::vector<std::unique_ptr<ShardResidence>> bufs_;  // Note [residence]: master (16-bit runs), then states
  int64_t steps_ = 0;
  bool master_ = false;             // 16-bit run: a master leads the tensors
  double compute_s_ = 0;            // the kernels run here (the host tier counts its own)
  std::unique_ptr<HostTier> host_;  // beside a device with host states (Note [host residence]); last: joins first
};

}  // namespace zt::zero
