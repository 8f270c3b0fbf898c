#include "optim_shard.h"

#include "zt/ops/ops.h"

namespace zt::zero {

OptimShard::OptimShard(const Plan& plan, const optim::OptimizerSpec& spec, int rank, const std::vector<Tensor>& initial)
    : spec_(spec), names_(optim::state_names(spec)) {
  optim::validate(spec_);
  for (size_t b = 0; b < plan.buffers.size(); ++b) {
    const int64_t n = plan.optim_range(b, rank).size();
    Buf buf;
    if (plan.policy.fp32_master) {
      TagScope tag(MemTag::master);
      buf.master = ops::cast(initial.at(b), DType::f32);
    }
    TagScope tag(MemTag::optim);
    for (size_t i = 0; i < names_.size(); ++i) buf.states.push_back(Tensor::zeros({n}, DType::f32));
    bufs_.push_back(std::move(buf));
  }
}

void OptimShard::update(size_t b, const Tensor& params, const Tensor& grads, float lr, float grad_scale) {
  optim::UpdateArgs a;
  a.param = params;
  a.master = bufs_[b].master;
  a.grad = grads;
  a.states = bufs_[b].states;
  a.lr = lr;
  a.step = steps_ + 1;
  a.grad_scale = grad_scale;
  optim::update(spec_, a);
}

std::vector<std::pair<std::string, Tensor>> OptimShard::state(size_t b) const {
  std::vector<std::pair<std::string, Tensor>> out;
  if (bufs_[b].master.defined()) out.emplace_back("master", bufs_[b].master);
  for (size_t i = 0; i < names_.size(); ++i) out.emplace_back(names_[i], bufs_[b].states[i]);
  return out;
}

}  // namespace zt::zero
