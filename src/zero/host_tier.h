#pragma once
// ZeRO-Offload's host tier of an optimizer shard beside a device (Note [host residence]): each
// buffer's gradient shard and parameter shard in pinned host memory, the copies down and up on the
// copy stream with their events, the updates started during backward on a HostWorker and the
// snapshots they speculate from (Note [host update overlap]). The optimizer shard keeps the states'
// residences and the update loop; the tier moves the bytes around them.
#include <functional>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "zt/core/copy_stream.h"
#include "zt/core/tensor.h"
#include "zt/zero/plan.h"

namespace zt::zero {

class HostWorker;
class ShardResidence;

class HostTier {
 public:
  // Note [host update overlap]: a step's update that may start behind its backward: the step's lr
  // and the gradients' scale expected (1, or 1/loss scale); `speculative` where clipping or an
  // fp16 overflow may still change it, so each buffer's states are snapshotted first and the
  // update redone (or undone) at the step.
  struct EarlyStep {
    float lr = 0, grad_scale = 1;
    bool speculative = false;
  };
  // What the tier uses of its optimizer shard: the update over buffer b's tiles (params, grads,
  // lr, grad_scale, step, working; the kernel's seconds), and buffer b's residence (snapshots).
  struct Shard {
    std::function<double(size_t, const Tensor&, const Tensor&, float, float, int64_t, const Tensor&)> apply;
    std::function<ShardResidence&(size_t)> residence;
  };
  // The pinned shards of every buffer of `plan` at `rank`; `tensors`: each buffer's master and
  // states, snapshotted where Policy::snapshot_host_update says (not for swap files).
  HostTier(const Plan& plan, int rank, size_t tensors, Shard shard);
  ~HostTier();  // the worker first: it runs what is queued
  HostTier(const HostTier&) = delete;
  HostTier& operator=(const HostTier&) = delete;

  void begin_step(std::optional<EarlyStep> early) { early_step_ = early; }
  void end_step() { early_step_.reset(); }
  // OptimShard::take_gradient beside a device: buffer b's gradient (and, fp32 without a master,
  // its parameters) start down; with an early step, its update is queued on the worker.
  void take_gradient(size_t b, const Tensor& params, const Tensor& grads, int64_t step);
  // OptimShard::update beside a device: the early update kept, redone or the update run now on
  // host memory, then the parameters go up on the copy stream (later compute work waits for them).
  void update(size_t b, const Tensor& params, const Tensor& grads, float lr, float grad_scale, int64_t step);
  // OptimShard::discard_step: the copies down waited for, the early updates undone where they speculated.
  void discard_step(const std::function<Tensor(size_t)>& params);
  // The copies' times and bytes, the early updates' figures, compute_s: the kernels this tier ran.
  SwapStats stats() const { return stats_; }

 private:
  // The host tensor the update writes the parameters into (a pinned copy, or the host-resident
  // shard itself), after its previous upload has landed.
  Tensor host_params(size_t b, const Tensor& params);
  void wait_for_gradient(size_t b, const Tensor& grads);
  // The early update of buffer b has ended; `keep` false puts its snapshot back (`params`: the
  // host tensor its update wrote).
  void end_early(size_t b, const Tensor& params, bool keep);
  void copy_snapshot(size_t b, const Tensor& params, bool save);

  Shard shard_;
  bool master_ = false;         // 16-bit run: the rule does not read the parameters
  bool grads_to_host_ = false;  // Note [host gradient shard]: the device's gradient goes once copied
  // Each buffer's gradient shard and parameter shard in pinned memory (no parameter copy where
  // stage 3 keeps the shard in host memory), and their copies in flight.
  std::vector<Tensor> grads_, params_;
  std::vector<CopyEvent> grads_down_, params_down_, params_up_;
  struct Early {
    int64_t ticket = 0;  // HostWorker's; 0: none
    EarlyStep step;
    // What the job measured (its own, read once it has run): the kernel's and the whole job's seconds.
    std::shared_ptr<std::pair<double, double>> seconds;
  };
  std::vector<Early> early_;
  std::optional<EarlyStep> early_step_;
  std::vector<std::vector<Tensor>> snapshot_;  // per buffer, its residence's tensors and the parameters
  SwapStats stats_;                            // the caller's thread only
  std::unique_ptr<HostWorker> worker_;         // made at the first early update; last, so it joins first
};

}  // namespace zt::zero
