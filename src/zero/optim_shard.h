#pragma once
// This rank's optimizer shard of every flat buffer: the fp32 master weights (16-bit runs) and
// the optimizer states over plan.optim_range, updated by optim's stateless kernels. They live
// where the policy says (Residence; Note [residence]): in the device's memory, in pinned host
// memory (Note [host residence]), or in one swap file per buffer streamed through a few tile
// buffers (Note [optimizer swap]).
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "zt/core/copy_stream.h"
#include "zt/core/tensor.h"
#include "zt/optim/optimizer.h"
#include "zt/zero/plan.h"
#include "zt/zero/shard_state.h"

namespace zt::zero {

class HostWorker;
class ShardResidence;

class OptimShard {
 public:
  // `initial(b)` gives this rank's working parameters of buffer b (the master starts from them).
  OptimShard(const Plan& plan, const config::OptimizerConfig& spec, int rank,
             const std::function<Tensor(size_t)>& initial);
  ~OptimShard();

  // Note [host update overlap]: a step's update that may start behind its backward, beside a
  // device with the states in pinned host memory: the step's lr and the gradients' scale expected
  // (1, or 1/loss scale); `speculative` where clipping or an fp16 overflow may still change it, so
  // each buffer's states are snapshotted first and the update redone (or undone) at the step.
  struct EarlyStep {
    float lr = 0, grad_scale = 1;
    bool speculative = false;
  };
  void begin_step(std::optional<EarlyStep> early) { early_step_ = early; }
  // Buffer b's averaged gradient is final (GradReducer's on_final): beside a device it starts
  // coming down into pinned memory on the copy stream while backward goes on (Note [host residence]).
  // `params` is this rank's range of the parameters, as update() takes it.
  void take_gradient(size_t b, const Tensor& params, const Tensor& grads);
  // One update of buffer b: params and grads are this rank's range, any float dtypes. Beside a
  // device the updated parameters go up on the copy stream; later compute work waits for them.
  // `widened` (optional, f32 over the same range): written with float(params) in the same pass
  // where the update runs where the parameters are (Note [widened by the update]); says whether it was.
  bool update(size_t b, const Tensor& params, const Tensor& grads, float lr, float grad_scale,
              const Tensor& widened = Tensor());
  void finish_step() {
    ++steps_;
    early_step_.reset();
  }
  // An fp16 step skipped on overflow, or a step that failed: the updates started behind backward
  // are waited for (a failed job's error dropped: the step's own error is the one said) and undone
  // where they speculated (`params(b)`: buffer b's parameters as update() takes them).
  void discard_step(const std::function<Tensor(size_t)>& params);
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
  // Beside a device: the host tensor the update writes the parameters into (a pinned copy, or the
  // host-resident shard itself), after its previous upload has landed.
  Tensor host_params(size_t b, const Tensor& params);
  void wait_for_gradient(size_t b, const Tensor& grads);
  // The early update of buffer b has ended; `keep` false puts its snapshot back (`params`: the
  // host tensor its update wrote).
  void end_early(size_t b, const Tensor& params, bool keep);
  void copy_snapshot(size_t b, const Tensor& params, bool save);

  config::OptimizerConfig spec_;
  std::function<Tensor(size_t)> initial_;
  std::vector<std::string> names_;
  std::vector<Tensor> slots_;  // Residence::file: the tile buffers its files share (master first, each tile_ elements)
  std::vector<std::unique_ptr<ShardResidence>> bufs_;  // Note [residence]: master (16-bit runs), then states
  int64_t steps_ = 0;
  bool master_ = false;  // 16-bit run: a master leads the tensors
  bool grads_to_host_ = false;  // Note [host gradient shard]: the device's gradient goes once copied
  int64_t tile_ = 0;     // Residence::file: elements of each tensor per tile
  // Beside a device (Note [host residence]): each buffer's gradient shard and parameter shard in
  // pinned memory (no parameter copy where stage 3 keeps the shard in host memory), their copies
  // in flight, and the host updates started during backward (Note [host update overlap]).
  std::vector<Tensor> host_grads_, host_params_;
  std::vector<CopyEvent> grads_down_, params_down_, params_up_;
  struct Early {
    int64_t ticket = 0;  // HostWorker's; 0: none
    EarlyStep step;
    // What the job measured (its own, read once it has run): the kernel's and the whole job's seconds.
    std::shared_ptr<std::pair<double, double>> seconds;
  };
  std::vector<Early> early_;
  std::optional<EarlyStep> early_step_;
  std::vector<std::vector<Tensor>> snapshot_;  // per buffer, its residence's tensors (speculative updates)
  SwapStats staging_;  // the copies' times and bytes, the early updates' waits (the caller's thread only)
  double compute_s_ = 0;
  std::unique_ptr<HostWorker> worker_;  // made at the first early update; last, so it joins first
};

}  // namespace zt::zero
