// Note [host residence]: with offload_optimizer.device = cpu on a device (ZeRO-Offload), the
// fp32 master and optimizer states live in pinned host memory and the host's kernel updates
// them. Each buffer's gradient shard comes down into pinned memory on the copy stream as soon as
// its reduction is final (Note [copy stream]), while backward goes on, as DeepSpeed keeps
// ZeRO-Offload's gradients in host memory; the update then goes tile by tile (swap_tile_elems()):
// the host writes the master and the rounded parameter into a pinned parameter tile (fp32 runs
// without a master bring the parameter down first), and that tile goes up. The update is the
// same element-wise kernel, so the trajectory is the in-memory one bit for bit. Swap files on a
// device (offload_optimizer.device = nvme, ZeRO-Infinity) stage each tile the same way; on the
// host a file's tiles are updated by the same kernel too (Note [optimizer swap]), RAM holding only
// the tile buffers (Plan::memory()).
#include "optim_shard.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "residence.h"
#include "swap_file.h"
#include "zt/ops/ops.h"

namespace zt::zero {

OptimShard::OptimShard(const Plan& plan, const config::OptimizerConfig& spec, int rank,
                       const std::function<Tensor(size_t)>& initial)
    : spec_(spec), initial_(initial), names_(optim::state_names(spec)), master_(plan.policy.fp32_master) {
  optim::validate(spec_);
  const Residence where = plan.policy.optimizer_residence;
  if (plan.host_staging_bytes() > 0) {  // Note [host residence]: the tiles through which a device's update goes
    tile_ = plan.swap_tile_elems();
    stage_param_ = pinned_zeros(tile_, plan.policy.param_dtype, MemTag::optim);
    for (size_t b = 0; b < plan.buffers.size(); ++b)  // tagged as the plan counts them: host staging
      host_grads_.push_back(pinned_zeros(plan.optim_range(b, rank).size(), plan.policy.grad_accum_dtype, MemTag::optim));
    grads_down_.resize(plan.buffers.size());
  }
  std::string dir;  // Residence::file: this rank's swap folder
  if (where == Residence::file) {
    dir = make_swap_folder(plan.policy.swap.dir, rank);
    tile_ = plan.swap_tile_elems();
    TagScope tag(MemTag::optim);
    for (int s = 0; s < plan.policy.swap.buffers; ++s)
      slots_.push_back(page_aligned(plan.swap_slot_bytes() - 4096, DType::f32));
  }
  const size_t k = (master_ ? 1 : 0) + names_.size();
  for (size_t b = 0; b < plan.buffers.size(); ++b) {
    const int64_t n = plan.optim_range(b, rank).size();
    if (where == Residence::file) {
      auto init = master_ ? std::function<Tensor()>([this, b] { return initial_(b); }) : nullptr;
      bufs_.push_back(file_residence(dir + "/b" + std::to_string(b) + ".swap", n, k,
                                     {&slots_, tile_, plan.policy.swap}, std::move(init)));
      continue;
    }
    const bool host = where == Residence::host;
    const Device d = host ? Device::cpu() : plan.policy.device;
    std::vector<Tensor> t;
    if (master_) {
      TagScope tag(MemTag::master);
      t.push_back(host ? pinned_zeros(n, DType::f32, MemTag::master) : ops::cast(initial(b), DType::f32));
      if (host) t.back().copy_(initial(b));  // set-up: the converting copy stages through the host
    }
    TagScope tag(MemTag::optim);
    for (size_t i = 0; i < names_.size(); ++i)
      t.push_back(host ? pinned_zeros(n, DType::f32, MemTag::optim) : Tensor::zeros({n}, DType::f32, d));
    bufs_.push_back(memory_residence(n, d, std::move(t), host ? tile_ : 0));
  }
}

OptimShard::~OptimShard() = default;

void OptimShard::take_gradient(size_t b, const Tensor& grads) {
  if (host_grads_.empty() || grads.device().is_cpu()) return;
  grads_down_[b] = copy_on_copy_stream(host_grads_[b], grads);
  staging_.bytes_down += uint64_t(grads.nbytes());
}

// One loop for every residence: a tier whose tiles are not where the parameters and gradients are
// takes them through the staging tiles (a device's gradients come down whole first).
void OptimShard::update(size_t b, const Tensor& params, const Tensor& device_grads, float lr, float grad_scale) {
  ShardResidence& res = *bufs_[b];
  Tensor grads = device_grads;
  if (!host_grads_.empty() && !grads.device().is_cpu()) {
    const auto t0 = std::chrono::steady_clock::now();
    if (grads_down_[b].defined()) {  // the host waits only for what backward did not hide
      std::exchange(grads_down_[b], CopyEvent()).synchronize();
    } else {  // no take_gradient this step: down now
      host_grads_[b].copy_(grads);
      staging_.bytes_down += uint64_t(grads.nbytes());
    }
    staging_.down_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    grads = host_grads_[b];
  }
  const bool staged = res.device() != params.device() || res.device() != grads.device();
  optim::UpdateArgs a;
  a.lr = lr;
  a.step = steps_ + 1;
  a.grad_scale = grad_scale;
  res.visit(
      [&](int64_t begin, int64_t len, const std::vector<Tensor>& views) {
        if (staged) {
          stage_down(params, grads, begin, len, a);
        } else {
          a.param = params.slice(0, begin, begin + len);
          a.grad = grads.slice(0, begin, begin + len);
        }
        a.master = master_ ? views[0] : Tensor();
        a.states.assign(views.begin() + (master_ ? 1 : 0), views.end());
        timed_update(a);
        if (staged) stage_up(params, begin, len);
      },
      [&](int64_t begin, int64_t len, const std::vector<Tensor>& views) {
        if (!master_) return;  // a fresh file's master starts from the working parameters
        Tensor master = views[0];
        master.copy_(params.slice(0, begin, begin + len));
      });
}

// a.param and a.grad for elements [begin, begin + len): the gradients are host memory (a device's
// came down whole first); the parameters are their own slice where they are host memory (stage
// 3's with offload_param.device=cpu), else the staging tile (copied down only in fp32 runs, where
// it is the weight the rule reads).
void OptimShard::stage_down(const Tensor& params, const Tensor& grads, int64_t begin, int64_t len,
                            optim::UpdateArgs& a) {
  a.param = params.slice(0, begin, begin + len);
  a.grad = grads.slice(0, begin, begin + len);
  ZT_ASSERT(grads.device().is_cpu(), "staged update: the gradients are on ", grads.device(), ", not come down");
  if (params.device().is_cpu()) return;
  const auto t0 = std::chrono::steady_clock::now();
  {
    a.param = stage_param_.slice(0, 0, len);
    if (!master_) a.param.copy_(params.slice(0, begin, begin + len));
    staging_.bytes_down += master_ ? 0 : uint64_t(a.param.nbytes());
  }
  staging_.down_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The updated parameters of the tile go back up (nothing to do where they were updated in place).
void OptimShard::stage_up(const Tensor& params, int64_t begin, int64_t len) {
  if (!stage_param_.defined() || params.device().is_cpu()) return;
  const auto t0 = std::chrono::steady_clock::now();
  params.slice(0, begin, begin + len).copy_(stage_param_.slice(0, 0, len));
  staging_.up_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  staging_.bytes_up += uint64_t(len) * dtype_size(params.dtype());
}

void OptimShard::timed_update(const optim::UpdateArgs& a) {
  const auto t0 = std::chrono::steady_clock::now();
  optim::update(spec_, a);
  compute_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::vector<ShardTensor> OptimShard::state(size_t b) {
  std::vector<std::string> names;
  if (master_) names.push_back("master");
  names.insert(names.end(), names_.begin(), names_.end());
  std::vector<ShardTensor> out;
  for (size_t j = 0; j < names.size(); ++j) out.push_back(bufs_[b]->tensor(j, names[j]));
  return out;
}

SwapStats OptimShard::swap_stats() const {
  SwapStats st = staging_;
  st.compute_s = compute_s_;
  for (const auto& r : bufs_) st += r->stats();
  return st;
}

}  // namespace zt::zero
