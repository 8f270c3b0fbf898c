// Note [residence]'s one update loop: each buffer's master and states in their residence, updated
// by the same kernel wherever they are; beside a device with the states in pinned host memory the
// HostTier moves gradients down and parameters up around it (Note [host residence]).
#include "optim_shard.h"

#include <chrono>

#include "residence.h"

namespace zt::zero {

OptimShard::OptimShard(const Plan& plan, const config::OptimizerConfig& spec, int rank,
                       const std::function<Tensor(size_t)>& initial)
    : spec_(spec), initial_(initial), names_(optim::state_names(spec)), master_(plan.policy.fp32_master) {
  optim::validate(spec_);
  const size_t k = (master_ ? 1 : 0) + names_.size();
  if (plan.host_staging_bytes() > 0) {  // Note [host residence]
    HostTier::Shard shard;
    shard.apply = [this](size_t b, const Tensor& params, const Tensor& grads, float lr, float grad_scale, int64_t step,
                         const Tensor& working) { return apply(b, params, grads, lr, grad_scale, step, working); };
    shard.residence = [this](size_t b) -> ShardResidence& { return *bufs_[b]; };
    host_ = std::make_unique<HostTier>(plan, rank, k, std::move(shard));
  }
  // Note [residence tiers]: each buffer's master and states, made by their tier.
  const ResidenceTier& tier = tier_of(plan.policy.optimizer_residence);
  shared_ = std::make_unique<TierShared>();
  if (tier.share) tier.share(plan, rank, *shared_);
  for (size_t b = 0; b < plan.buffers.size(); ++b)
    bufs_.push_back(tier.optimizer_buffer(
        {plan, b, plan.optim_range(b, rank).size(), k, master_, [this, b] { return initial_(b); }, *shared_}));
}

OptimShard::~OptimShard() = default;  // host_ first (declared last): its worker runs what is queued

bool OptimShard::update(size_t b, const Tensor& params, const Tensor& grads, float lr, float grad_scale,
                        const Tensor& widened) {
  if (!host_ || (grads.defined() && grads.device().is_cpu())) {
    compute_s_ += apply(b, params, grads, lr, grad_scale, steps_ + 1, params, widened);
    return widened.defined();
  }
  host_->update(b, params, grads, lr, grad_scale, steps_ + 1);  // Note [host residence]
  return false;
}

// One loop for every residence: the tier's tiles, with the same elements of the parameters and
// gradients (which are where the tier is: a device's came down first). A fresh file's master
// starts from `working`, the parameters as the model has them.
double OptimShard::apply(size_t b, const Tensor& params, const Tensor& grads, float lr, float grad_scale, int64_t step,
                         const Tensor& working, const Tensor& widened) {
  ShardResidence& res = *bufs_[b];
  ZT_ASSERT(res.device() == params.device() && res.device() == grads.device(), "update of buffer ", b, " on ",
            res.device(), " with parameters on ", params.device(), " and gradients on ", grads.device());
  optim::UpdateArgs a;
  a.lr = lr;
  a.step = step;
  a.grad_scale = grad_scale;
  double seconds = 0;
  res.visit(
      [&](int64_t begin, int64_t len, const std::vector<Tensor>& views) {
        a.param = params.slice(0, begin, begin + len);
        a.grad = grads.slice(0, begin, begin + len);
        a.widened = widened.defined() ? widened.slice(0, begin, begin + len) : Tensor();
        a.master = master_ ? views[0] : Tensor();
        a.states.assign(views.begin() + (master_ ? 1 : 0), views.end());
        const auto t0 = std::chrono::steady_clock::now();
        optim::update(spec_, a);
        seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      },
      [&](int64_t begin, int64_t len, const std::vector<Tensor>& views) {
        if (!master_) return;
        Tensor master = views[0];
        master.copy_(working.slice(0, begin, begin + len));
      });
  return seconds;
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
  SwapStats st = host_ ? host_->stats() : SwapStats();  // the copies' and the early updates' figures
  st.compute_s += compute_s_;
  for (const auto& r : bufs_) st += r->stats();
  return st;
}

}  // namespace zt::zero
