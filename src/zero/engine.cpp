#include "zt/zero/engine.h"

#include <cmath>
#include <unordered_map>

#include "zt/autograd/autograd.h"
#include "zt/autograd/functions.h"
#include "zt/ops/ops.h"
#include "zt/optim/clip.h"
#include "engine_buffer.h"

namespace zt::zero {

namespace {
Tensor flat_view(const Tensor& buf, int64_t begin, int64_t end) { return buf.slice(0, begin, end); }
}  // namespace

Engine::Engine(nn::Module& model, comm::GroupPtr group, EngineOptions opts)
    : model_(model), group_(std::move(group)), opts_(std::move(opts)) {
  ZT_CHECK(group_, "[zero] no process group");
  ZT_CHECK(opts_.stage >= 0 && opts_.stage <= 3, "[zero] zero_optimization.stage must be 0, 1, 2 or 3, got ",
           opts_.stage);
  ZT_CHECK(opts_.gradient_accumulation_steps >= 1, "[zero] gradient_accumulation_steps must be >= 1, got ",
           opts_.gradient_accumulation_steps);
  world_ = group_->size();
  rank_ = group_->rank();
  std::vector<int64_t> numels;
  for (auto& [name, p] : model_.named_parameters()) {
    ZT_CHECK(p.dtype() == DType::f32, "[zero] parameter ", name, " is ", dtype_name(p.dtype()), "; expected f32");
    params_.push_back(p);
    names_.push_back(name);
    numels.push_back(p.numel());
  }
  ZT_CHECK(!params_.empty(), "[zero] the model has no parameters");
  if (opts_.stage == 3) {
    std::unordered_map<TensorImpl*, size_t> index;
    for (size_t i = 0; i < params_.size(); ++i) index[params_[i].impl()] = i;
    std::vector<std::vector<size_t>> units;
    units_ = model_.parameter_owners();
    for (nn::Module* u : units_) {
      units.emplace_back();
      for (auto& [n, p] : u->own_parameters()) units.back().push_back(index.at(p.impl()));
    }
    plan_ = plan_units(numels, units, world_);
  } else {
    plan_ = plan_buckets(numels, opts_.reduce_bucket_size, world_);
  }

  for (size_t bi = 0; bi < plan_.size(); ++bi) {
    auto b = std::make_unique<Buffer>();
    b->plan = plan_[bi];
    b->own = shard_range(b->plan.padded, world_, rank_);
    const int64_t S = b->own.size();
    b->persistent = opts_.stage == 3 && b->plan.numel <= opts_.stage3_param_persistence_threshold;
    // Parameters: copy the model's initial values into the flat layout, then point at it.
    Tensor full;
    {
      TagScope tag(MemTag::param);
      full = Tensor::zeros({b->plan.padded});
    }
    for (auto& s : b->plan.params) flat_view(full, s.offset, s.offset + s.numel).copy_(params_[s.index].reshape({s.numel}));
    if (opts_.stage == 3) {
      TagScope tag(MemTag::param);
      b->param_shard = flat_view(full, b->own.begin, b->own.end).clone();
      if (b->persistent) {
        b->full_param = full;
        bind_params(*b);
      } else {
        unbind_params(*b);
      }
    } else {
      b->full_param = full;
      bind_params(*b);
    }
    // Gradients: full and persistent for stages 0-1, a shard for stages 2-3.
    {
      TagScope tag(MemTag::grad);
      if (opts_.stage <= 1) {
        b->full_grad = Tensor::zeros({b->plan.padded});
        attach_grad_views(*b);
      } else {
        b->grad_shard = Tensor::zeros({S});
      }
    }
    {
      TagScope tag(MemTag::optim);
      const int64_t n = opts_.stage >= 1 ? S : b->plan.padded;
      for (size_t k = 0; k < optim::state_names(opts_.optimizer).size(); ++k) b->opt.states.push_back(Tensor::zeros({n}));
    }
    for (auto& s : b->plan.params)
      autograd::add_grad_ready_hook(params_[s.index], [this, bi](Tensor&) { on_param_ready(bi); });
    bufs_.push_back(std::move(b));
  }
  if (opts_.stage == 3) install_stage3_hooks();
}

Engine::~Engine() {
  for (auto& p : params_) autograd::clear_grad_ready_hooks(p);
  for (nn::Module* u : units_) {
    u->set_pre_hook(nullptr);
    u->set_post_hook(nullptr);
  }
}

void Engine::bind_params(Buffer& b) {
  for (auto& s : b.plan.params) {
    TensorImpl* impl = params_[s.index].impl();
    impl->storage = b.full_param.storage();
    impl->offset = b.full_param.offset() + s.offset;
    impl->strides = contiguous_strides(impl->shape);
  }
}

void Engine::unbind_params(Buffer& b) {
  for (auto& s : b.plan.params) params_[s.index].impl()->storage = nullptr;
}

void Engine::attach_grad_views(Buffer& b) {
  for (auto& s : b.plan.params) {
    const Tensor& p = params_[s.index];
    autograd::set_grad(p, Tensor::view_of(b.full_grad.storage(), b.full_grad.offset() + s.offset, p.shape(), DType::f32));
  }
}

void Engine::backward(const Tensor& loss) {
  ++micro_;
  boundary_pass_ = micro_ % opts_.gradient_accumulation_steps == 0;
  for (size_t bi = 0; bi < bufs_.size(); ++bi) {
    Buffer& b = *bufs_[bi];
    b.pending = int(b.plan.params.size());
    b.reduce_launched = false;
    if (opts_.stage == 2) {  // contiguous_gradients: backward writes straight into the bucket
      TagScope tag(MemTag::comm);
      b.full_grad = Tensor::zeros({b.plan.padded});
      attach_grad_views(b);
    }
  }
  const int64_t gas = opts_.gradient_accumulation_steps;
  autograd::backward(gas > 1 ? ag::scale(loss, 1.f / float(gas)) : loss);
  // Buffers whose parameters got no gradient still take part, so every rank issues the same
  // collectives in the same order.
  for (size_t bi = 0; bi < bufs_.size(); ++bi) {
    Buffer& b = *bufs_[bi];
    if (b.reduce_launched) continue;
    if (opts_.stage == 3 && !b.full_grad.defined()) prepare_unit_backward(bi);
    if (opts_.stage >= 2 || boundary_pass_) launch_reduce(bi);
  }
  finish_all_reduces();
}

void Engine::on_param_ready(size_t bi) {
  Buffer& b = *bufs_[bi];
  if (--b.pending > 0 || b.reduce_launched) return;
  if (opts_.stage >= 2 || boundary_pass_) launch_reduce(bi);
}

void Engine::launch_reduce(size_t bi) {
  Buffer& b = *bufs_[bi];
  b.reduce_launched = true;
  group_->set_context("step " + std::to_string(steps_ + 1) + ", micro-batch " + std::to_string(micro_) +
                      ", bucket " + std::to_string(bi));
  if (opts_.stage == 0) {
    b.reduce_work = group_->all_reduce_async(b.full_grad);
  } else {
    TagScope tag(MemTag::comm);
    b.recv = Tensor::empty({b.own.size()}, DType::f32);
    b.reduce_work = group_->reduce_scatter_async(b.full_grad, b.recv);
  }
  if (!opts_.overlap_comm) finish_reduce(bi);
}

void Engine::finish_reduce(size_t bi) {
  Buffer& b = *bufs_[bi];
  if (!b.reduce_work) return;
  b.reduce_work->wait();
  b.reduce_work = nullptr;
  const float inv = 1.f / float(world_);
  if (opts_.stage == 0) {
    if (world_ > 1) optim::scale_(b.full_grad.data<float>(), b.full_grad.numel(), inv);
  } else if (opts_.stage == 1) {
    Tensor own = flat_view(b.full_grad, b.own.begin, b.own.end);
    own.zero_();
    ops::axpy_(own, inv, b.recv);
  } else {
    ops::axpy_(b.grad_shard, inv, b.recv);
    b.full_grad = Tensor();
    for (auto& s : b.plan.params) autograd::set_grad(params_[s.index], Tensor());
    if (opts_.stage == 3 && !b.persistent) release_unit(bi);
  }
  b.recv = Tensor();
}

void Engine::finish_all_reduces() {
  for (size_t bi = 0; bi < bufs_.size(); ++bi) finish_reduce(bi);
  for (size_t bi = 0; bi < bufs_.size(); ++bi)
    if (opts_.stage == 3 && !bufs_[bi]->persistent) release_unit(bi);
}

double Engine::local_grad_sumsq() {
  double s = 0;
  for (auto& b : bufs_) {
    if (opts_.stage == 0) s += optim::sum_of_squares(b->full_grad.data<float>(), b->full_grad.numel());
    else if (opts_.stage == 1) s += optim::sum_of_squares(b->full_grad.data<float>() + b->own.begin, b->own.size());
    else s += optim::sum_of_squares(b->grad_shard.data<float>(), b->grad_shard.numel());
  }
  return s;
}

void Engine::scale_grads(float c) {
  for (auto& b : bufs_) {
    if (opts_.stage == 0) optim::scale_(b->full_grad.data<float>(), b->full_grad.numel(), c);
    else if (opts_.stage == 1) optim::scale_(b->full_grad.data<float>() + b->own.begin, b->own.size(), c);
    else optim::scale_(b->grad_shard.data<float>(), b->grad_shard.numel(), c);
  }
}

StepStats Engine::step(double lr) {
  ZT_CHECK(at_boundary(), "[zero] step() needs ", opts_.gradient_accumulation_steps,
           " backward() calls since the last step, got ", micro_ % opts_.gradient_accumulation_steps);
  group_->set_context("step " + std::to_string(steps_ + 1) + ", gradient norm");
  double sumsq = local_grad_sumsq();
  if (opts_.stage >= 1) sumsq = group_->all_reduce_scalar(sumsq);  // each rank holds one shard
  StepStats st;
  st.grad_norm = std::sqrt(sumsq);
  if (opts_.gradient_clipping > 0) {
    st.clip_coef = optim::clip_coefficient(st.grad_norm, opts_.gradient_clipping);
    if (st.clip_coef < 1) scale_grads(float(st.clip_coef));
  }
  for (size_t bi = 0; bi < bufs_.size(); ++bi) {
    Buffer& b = *bufs_[bi];
    optim::UpdateArgs a;
    switch (opts_.stage) {
      case 0: a.param = b.full_param, a.grad = b.full_grad; break;
      case 1:
        a.param = flat_view(b.full_param, b.own.begin, b.own.end), a.grad = flat_view(b.full_grad, b.own.begin, b.own.end);
        break;
      case 2: a.param = flat_view(b.full_param, b.own.begin, b.own.end), a.grad = b.grad_shard; break;
      default: a.param = b.param_shard, a.grad = b.grad_shard; break;
    }
    a.states = b.opt.states;
    a.lr = float(lr);
    a.step = ++b.opt.step;
    optim::update(opts_.optimizer, a);
    group_->set_context("step " + std::to_string(steps_ + 1) + ", parameter all-gather, bucket " + std::to_string(bi));
    if (opts_.stage == 1 || opts_.stage == 2 || b.persistent) all_gather_params(b);
    if (opts_.stage <= 1) b.full_grad.zero_();
    else b.grad_shard.zero_();
  }
  ++steps_;
  return st;
}

void Engine::all_gather_params(Buffer& b) {
  if (opts_.stage == 3) {
    group_->all_gather(b.param_shard, b.full_param);
    return;
  }
  TagScope tag(MemTag::comm);
  Tensor mine = flat_view(b.full_param, b.own.begin, b.own.end).clone();
  group_->all_gather(mine, b.full_param);
}

void Engine::for_each_full_param(const std::function<void(const std::string&, const Tensor&)>& fn) {
  for (size_t bi = 0; bi < bufs_.size(); ++bi) {
    Buffer& b = *bufs_[bi];
    if (opts_.stage == 3) gather_unit(bi, true);
    for (auto& s : b.plan.params) fn(names_[s.index], params_[s.index]);
    if (opts_.stage == 3 && !b.persistent) release_unit(bi);
  }
}

MemoryEstimate Engine::expected_memory() const {
  std::vector<bool> persistent;
  for (auto& b : bufs_) persistent.push_back(b->persistent);
  return estimate_memory(plan_, opts_.stage, world_, optim::state_bytes_per_elem(opts_.optimizer), persistent);
}

int64_t Engine::num_params() const {
  int64_t n = 0;
  for (auto& b : plan_) n += b.numel;
  return n;
}

int64_t Engine::padded_params() const {
  int64_t n = 0;
  for (auto& b : plan_) n += b.padded;
  return n;
}

}  // namespace zt::zero
