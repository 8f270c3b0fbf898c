// Note [host residence]: with offload_optimizer.device = cpu on a device (ZeRO-Offload), the
// fp32 master and optimizer states live in pinned host memory and the host's kernel updates
// them. Each buffer's gradient shard comes down into pinned memory on the copy stream as soon as
// its reduction is final (Note [copy stream]), while backward goes on (at stages 2-3 with one
// micro-batch a step the reduction's output itself, Note [host gradient shard]), as DeepSpeed keeps
// ZeRO-Offload's gradients in host memory (fp32 runs without a master bring the parameter shard
// down beside it: the rule reads it). The host writes the master and the rounded parameters into
// a pinned parameter shard, which goes up on the copy stream; the device's next work on them (the
// publish) waits for it. The update is the same element-wise kernel, so the trajectory is the
// in-memory one bit for bit. Swap files on a device (offload_optimizer.device = nvme,
// ZeRO-Infinity) stage the same way; on the host a file's tiles are updated by the same kernel too
// (Note [optimizer swap]), RAM holding only the tile buffers (Plan::memory()). All of this is the
// HostTier's; OptimShard keeps the residences and the one update loop over them.
//
// Note [host update overlap]: where the learning rate is given before backward
// (Engine::begin_step), each buffer's host update starts on a HostWorker thread as soon as its
// gradient is final, behind the rest of backward: the thread waits for the gradient's copy and runs
// the kernel on host memory only; the step waits for it and sends the parameters up. Without
// clipping or fp16 the scale is 1 and the update is the one the step would run. With them the
// scale is known only after backward (the norm, the overflow vote), so the thread speculates that
// nothing clips (scale 1/loss scale, the step's scale whenever the clip coefficient is 1) after a
// snapshot of the buffer's master and states (Policy::snapshot_host_update, in the plan); the step
// keeps it where the scale matches, else puts the snapshot back and updates again with the real
// scale, and an fp16 step skipped on overflow puts every snapshot back. Either way the trajectory
// is the at-the-step one bit for bit. Engine::begin_step speculates only after a step that did not
// clip or overflow. Speculation is DeepSpeed's offload_optimizer.super_offload (SuperOffload's
// speculation-then-validation), off by default: it doubles the pinned states. Without it a
// clipped or fp16 run updates at the step. Not with stage 3's parameters in swap files, whose
// shards the store moves.
#include "host_tier.h"

#include <chrono>
#include <exception>

#include "host_worker.h"
#include "residence.h"
#include "swap_file.h"

namespace zt::zero {

HostTier::HostTier(const Plan& plan, int rank, size_t tensors, Shard shard)
    : shard_(std::move(shard)), master_(plan.policy.fp32_master), grads_to_host_(plan.policy.grads_to_host) {
  const size_t nb = plan.buffers.size();
  for (size_t b = 0; b < nb; ++b) {  // tagged as the plan counts them (host staging)
    const int64_t n = plan.optim_range(b, rank).size();
    grads_.push_back(pinned_zeros(n, plan.policy.grad_accum_dtype, MemTag::optim));
    const bool on_host = plan.param_on_host(b) || plan.param_swapped(b);  // stage 3's shard already host memory
    params_.push_back(on_host ? Tensor() : pinned_zeros(n, plan.policy.param_dtype, MemTag::optim));
  }
  grads_down_.resize(nb);
  params_down_.resize(nb);
  params_up_.resize(nb);
  early_.resize(nb);
  if (!plan.policy.snapshot_host_update) return;
  snapshot_.resize(nb);
  if (plan.policy.optimizer_medium() == Medium::files) return;  // a file's tiles: no snapshot
  for (size_t b = 0; b < nb; ++b) {  // the tensors and the parameters, as Plan::memory counts them
    const int64_t n = plan.optim_range(b, rank).size();
    for (size_t j = 0; j <= tensors; ++j)
      snapshot_[b].push_back(pinned_zeros(n, j < tensors ? DType::f32 : plan.policy.param_dtype, MemTag::optim));
  }
}

HostTier::~HostTier() = default;  // worker_ first (declared last): it runs what is queued

void HostTier::take_gradient(size_t b, const Tensor& params, const Tensor& grads, int64_t step) {
  if (grads.device().is_cpu()) return;
  ZT_ASSERT(early_[b].ticket == 0, "buffer ", b, "'s gradient taken twice in one step");
  grads_down_[b] = copy_on_copy_stream(grads_[b], grads);
  if (grads_to_host_) grads_down_[b].make_compute_wait();  // Note [host gradient shard]: grads goes next
  stats_.bytes_down += uint64_t(grads.nbytes());
  if (!params.defined()) return;  // a swapped shard: read in at the update
  Tensor p = host_params(b, params);
  if (!master_ && !params.device().is_cpu()) {  // fp32 without a master: the rule reads the parameters
    params_down_[b] = copy_on_copy_stream(p, params);
    stats_.bytes_down += uint64_t(params.nbytes());
  }
  if (!early_step_) return;
  ZT_ASSERT(!early_step_->speculative || !snapshot_.empty(), "speculative update without a snapshot");
  if (!worker_)  // its CUDA calls (the copies' events) on this run's device
    worker_ = std::make_unique<HostWorker>([d = grads.device()] { use_device_on_this_thread(d); });
  const EarlyStep e = *early_step_;
  // Note [host update overlap]: only host memory on the thread; the events are this job's alone.
  auto seconds = std::make_shared<std::pair<double, double>>();
  early_[b] = {worker_->submit([this, b, p, e, step, seconds, down = std::exchange(grads_down_[b], CopyEvent()),
                                pdown = std::exchange(params_down_[b], CopyEvent())] {
                 down.synchronize();
                 pdown.synchronize();
                 const auto t0 = std::chrono::steady_clock::now();
                 if (e.speculative) copy_snapshot(b, p, /*save=*/true);
                 seconds->first = shard_.apply(b, p, grads_[b], e.lr, e.grad_scale, step, p);
                 seconds->second = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
               }),
               e, seconds};
}

// Buffer b's master, states and the host parameters its update writes (`params`: stage 3's shard
// in host memory is the live one) into its snapshot, or back.
void HostTier::copy_snapshot(size_t b, const Tensor& params, bool save) {
  auto copy = [save](Tensor kept, Tensor live) { save ? kept.copy_(live) : live.copy_(kept); };
  shard_.residence(b).visit([&](int64_t begin, int64_t len, const std::vector<Tensor>& views) {
    for (size_t j = 0; j < views.size(); ++j) copy(snapshot_[b][j].slice(0, begin, begin + len), views[j]);
  });
  copy(snapshot_[b].back(), params);
}

void HostTier::end_early(size_t b, const Tensor& params, bool keep) {
  const auto t0 = std::chrono::steady_clock::now();
  const Early e = std::exchange(early_[b], Early());
  worker_->wait(e.ticket);
  stats_.early_wait_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  stats_.compute_s += e.seconds->first;  // the job has run: its figures are this thread's to read
  stats_.early_s += e.seconds->second;
  ++stats_.early_updates;
  if (keep) return;
  ZT_ASSERT(e.step.speculative, "buffer ", b, "'s early update has no snapshot to undo");
  copy_snapshot(b, params, /*save=*/false);
  ++stats_.early_redone;
}

void HostTier::discard_step(const std::function<Tensor(size_t)>& params) {
  early_step_.reset();
  // A discarded step's gradient copies down may still read the shards: the next writes wait for them.
  for (CopyEvent& down : grads_down_) {
    try {
      std::exchange(down, CopyEvent()).make_compute_wait();
    } catch (const std::exception&) {  // a failing device: the caller's error is said
    }
  }
  for (size_t b = 0; b < early_.size(); ++b) {
    if (early_[b].ticket == 0) continue;
    const bool speculative = early_[b].step.speculative;
    try {
      end_early(b, host_params(b, params(b)), /*keep=*/!speculative);
    } catch (const std::exception&) {  // a job's error: the caller's is said; the rest still undone
      early_[b] = Early();
    }
  }
}

Tensor HostTier::host_params(size_t b, const Tensor& params) {
  if (params.device().is_cpu()) return params;  // stage 3's shard in host memory: updated in place
  const auto t0 = std::chrono::steady_clock::now();
  std::exchange(params_up_[b], CopyEvent()).synchronize();  // the last step's upload has read it
  stats_.up_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return params_[b];
}

// The host waits only for what backward did not hide of the gradient's (and the parameters') copy.
void HostTier::wait_for_gradient(size_t b, const Tensor& grads) {
  const auto t0 = std::chrono::steady_clock::now();
  if (grads_down_[b].defined() || params_down_[b].defined()) {
    std::exchange(grads_down_[b], CopyEvent()).synchronize();
    std::exchange(params_down_[b], CopyEvent()).synchronize();
  } else {  // no take_gradient this step: down now
    ZT_ASSERT(grads.defined(), "buffer ", b, "'s gradient was sent to the host without its copy");
    grads_[b].copy_(grads);
    stats_.bytes_down += uint64_t(grads.nbytes());
  }
  stats_.down_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void HostTier::update(size_t b, const Tensor& params, const Tensor& grads, float lr, float grad_scale, int64_t step) {
  Tensor p;
  if (early_[b].ticket > 0) {  // Note [host update overlap]: started during backward
    const EarlyStep e = early_[b].step;
    const bool same = e.lr == lr && e.grad_scale == grad_scale;
    ZT_CHECK(same || e.speculative, "[zero] buffer ", b, "'s update started during backward with lr ", e.lr,
             " and scale ", e.grad_scale, "; the step asks lr ", lr, " and scale ", grad_scale,
             " (begin_step must name the step's lr)");
    p = host_params(b, params);
    end_early(b, p, same);
    if (!same) {  // clipped: again from the snapshot
      stats_.compute_s += shard_.apply(b, p, grads_[b], lr, grad_scale, step, params);
    }
  } else {
    const bool taken = grads_down_[b].defined();
    p = host_params(b, params);
    if (!taken && !master_ && !params.device().is_cpu()) {
      p.copy_(params);
      stats_.bytes_down += uint64_t(params.nbytes());
    }
    wait_for_gradient(b, grads);
    stats_.compute_s += shard_.apply(b, p, grads_[b], lr, grad_scale, step, params);
  }
  if (params.device().is_cpu()) return;
  const auto t0 = std::chrono::steady_clock::now();
  Tensor dst = params;
  params_up_[b] = copy_on_copy_stream(dst, p);
  params_up_[b].make_compute_wait();
  stats_.up_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  stats_.bytes_up += uint64_t(params.nbytes());
}

}  // namespace zt::zero
