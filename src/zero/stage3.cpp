// ZeRO stage 3: a unit's parameters are all-gathered before its forward (the next units
// prefetched), released after it, gathered again when backward reaches the unit, and released
// once its gradients are reduce-scattered into the owners' shards.
#include "zt/autograd/autograd.h"
#include "zt/zero/engine.h"
#include "engine_buffer.h"

namespace zt::zero {

void Engine::install_stage3_hooks() {
  for (size_t ui = 0; ui < units_.size(); ++ui) {
    units_[ui]->set_pre_hook([this, ui](nn::Module&) {
      gather_unit(ui, true);
      prefetch_after(ui, +1);
    });
    units_[ui]->set_post_hook([this, ui](nn::Module&, const Tensor& out) {
      Tensor y = out;
      if (autograd::grad_enabled() && autograd::requires_grad(out))
        y = autograd::on_backward(out, [this, ui] { prepare_unit_backward(ui); });
      if (!bufs_[ui]->persistent) release_unit(ui);
      return y;
    });
  }
}

void Engine::gather_unit(size_t bi, bool wait) {
  Buffer& b = *bufs_[bi];
  if (!b.full_param.defined()) {
    {
      TagScope tag(MemTag::param);
      b.full_param = Tensor::empty({b.plan.padded}, DType::f32);
    }
    b.gather_work = group_->all_gather_async(
        b.param_shard, b.full_param, "step " + std::to_string(steps_ + 1) + ", all-gather of unit " + std::to_string(bi));
  }
  if (wait && b.gather_work) {
    b.gather_work->wait();
    b.gather_work = nullptr;
    bind_params(b);
  }
}

void Engine::release_unit(size_t bi) {
  Buffer& b = *bufs_[bi];
  if (b.persistent || !b.full_param.defined()) return;
  if (b.gather_work) {
    b.gather_work->wait();
    b.gather_work = nullptr;
  }
  unbind_params(b);
  b.full_param = Tensor();
}

// Starts gathering the units after (dir=+1, forward) or before (dir=-1, backward) unit bi, up
// to stage3_prefetch_bucket_size elements, never exceeding stage3_max_live_parameters.
void Engine::prefetch_after(size_t bi, int dir) {
  int64_t live = 0;
  for (auto& b : bufs_)
    if (b->full_param.defined() && !b->persistent) live += b->plan.padded;
  int64_t budget = opts_.stage3_prefetch_bucket_size;
  for (int64_t j = int64_t(bi) + dir; j >= 0 && j < int64_t(bufs_.size()); j += dir) {
    Buffer& b = *bufs_[size_t(j)];
    if (b.persistent || b.full_param.defined()) continue;
    if (b.plan.padded > budget || live + b.plan.padded > opts_.stage3_max_live_parameters) break;
    gather_unit(size_t(j), false);
    budget -= b.plan.padded;
    live += b.plan.padded;
  }
}

void Engine::prepare_unit_backward(size_t bi) {
  Buffer& b = *bufs_[bi];
  gather_unit(bi, true);
  prefetch_after(bi, -1);
  TagScope tag(MemTag::comm);
  b.full_grad = Tensor::zeros({b.plan.padded});
  attach_grad_views(b);
}

}  // namespace zt::zero
