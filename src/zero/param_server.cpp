// The parameter-server baseline (Note [parameter server] in param_server.h): the step order of a
// classic server/worker split, on the plan, optimizer shard and optimizer kernels of the engine.
#include "zt/zero/param_server.h"

#include <algorithm>
#include <cmath>

#include "model_layout.h"
#include "optim_shard.h"
#include "zt/autograd/autograd.h"
#include "zt/autograd/functions.h"
#include "zt/ops/ops.h"
#include "zt/optim/clip.h"

namespace zt::zero {

PsMemory ps_memory(const Plan& plan, bool server) {
  const Policy& pol = plan.policy;
  const int64_t p = int64_t(dtype_size(pol.param_dtype)), a = int64_t(dtype_size(pol.grad_accum_dtype)),
                w = int64_t(dtype_size(pol.comm_dtype));
  PsMemory m;
  int64_t largest = 0;
  for (const BufferPlan& b : plan.buffers) {
    const int64_t n = server ? b.padded / plan.world : b.padded;
    largest = std::max(largest, n);
    m.param += p * n;
    m.grad += (server ? 4 : a) * n;
    if (server) m.master += pol.fp32_master ? 4 * n : 0;
    if (server) m.optim += plan.optim_state_bytes_per_elem * n;
  }
  if (server) m.comm = 2 * w * largest;
  return m;
}

void check_param_server_options(const EngineOptions& o) {
  ZT_CHECK_AS(ErrorKind::config, o.dtype != DType::f16, "[ps] the parameter server trains in fp32 or bf16, not fp16 ",
              "(set fp16.enabled to false, or bf16.enabled to true)");
  for (const auto* d : {&o.zero.offload_optimizer, &o.zero.offload_param})
    ZT_CHECK_AS(ErrorKind::config, d->device != "nvme" && (d->device != "cpu" || o.device.is_cpu()),
                "[ps] zero_optimization.", d == &o.zero.offload_optimizer ? "offload_optimizer" : "offload_param",
                ".device=", d->device, ": the parameter server keeps its states in ",
                o.device.is_cpu() ? "memory" : "the device's memory", " (set it to none)");
}

ParamServer::ParamServer(nn::Module& model, comm::GroupPtr group, EngineOptions opts, int servers)
    : model_(model), group_(std::move(group)), opts_(std::move(opts)), servers_(servers) {
  ZT_CHECK(group_, "[ps] no process group");
  ZT_CHECK_AS(ErrorKind::config, servers_ >= 1 && servers_ < group_->size(), "[ps] ", servers_,
              " parameter servers leave no worker in a group of ", group_->size());
  ZT_CHECK_AS(ErrorKind::config, opts_.gradient_accumulation_steps >= 1,
              "[ps] gradient_accumulation_steps must be >= 1, got ", opts_.gradient_accumulation_steps);
  check_param_server_options(opts_);
  opts_.zero.stage = 1;  // the servers partition as ZeRO-1 partitions among ranks
  opts_.sparse_gradients = false;
  ModelLayout m = layout_model(model_, opts_);
  params_ = std::move(m.params);
  names_ = std::move(m.names);
  frozen_ = std::move(m.frozen);
  frozen_names_ = std::move(m.frozen_names);
  plan_ = make_plan(m.input, m.policy, servers_);
  pushes_ = comm::stage_on(group_, device());  // Note [staged group] where the backend keeps host tensors
  const Materialize materialize = initial_values(model_, "[ps]");
  for (auto& p : frozen_) {
    if (is_server()) {
      p.release_storage();
      continue;
    }
    TagScope tag(MemTag::param);
    Tensor t = Tensor::empty(p.shape(), plan_.policy.param_dtype, device());
    materialize(p, 0, t.view({t.numel()}));
    p.rebind(t.storage(), t.offset(), t.dtype());
  }
  if (is_server())
    init_server(materialize);
  else
    init_worker(materialize);
}

ParamServer::~ParamServer() {
  if (!is_server())
    for (auto& p : params_) autograd::set_grad(p, Tensor());
}

// The buffers whole, parameters bound as views (as ParamStore at stages 0-2), and the gradient
// slots backward accumulates into (as GradReducer at stages 0-1).
void ParamServer::init_worker(const Materialize& materialize) {
  const Policy& pol = plan_.policy;
  for (size_t b = 0; b < plan_.buffers.size(); ++b) {
    const int64_t n = plan_.buffers[b].padded;
    {
      TagScope tag(MemTag::param);
      param_bufs_.push_back(Tensor::zeros({n}, pol.param_dtype, device()));
    }
    TagScope tag(MemTag::grad);
    grad_bufs_.push_back(Tensor::zeros({n}, pol.full_grad_dtype(), device()));
    for (auto& s : plan_.buffers[b].params)
      materialize(params_[s.index], 0, param_bufs_[b].slice(0, s.offset, s.offset + s.numel));
  }
  for (size_t b = 0; b < plan_.buffers.size(); ++b)
    for (auto& s : plan_.buffers[b].params) {
      Tensor& p = params_[s.index];
      p.rebind(param_bufs_[b].storage(), param_bufs_[b].offset() + s.offset, param_bufs_[b].dtype());
      autograd::set_grad(p, grad_bufs_[b].slice(0, s.offset, s.offset + s.numel).view(p.shape()), /*zeroed=*/true);
    }
}

// This server's range of each buffer (only the values it holds), then the fp32
// master and optimizer states (OptimShard, as ZeRO-1's rank `rank` over S ranks).
void ParamServer::init_server(const Materialize& materialize) {
  const Policy& pol = plan_.policy;
  const int s = group_->rank();
  int64_t largest = 0;
  for (size_t b = 0; b < plan_.buffers.size(); ++b) {
    const Range own = plan_.optim_range(b, s);
    largest = std::max(largest, own.size());
    {
      TagScope tag(MemTag::param);
      param_bufs_.push_back(Tensor::zeros({own.size()}, pol.param_dtype, device()));
    }
    TagScope tag(MemTag::grad);
    grad_bufs_.push_back(Tensor::zeros({own.size()}, DType::f32, device()));
    for (auto& slot : plan_.buffers[b].params) {
      const Range mine = intersect(own, {slot.offset, slot.offset + slot.numel});
      if (!mine.empty())
        materialize(params_[slot.index], mine.begin - slot.offset,
                    param_bufs_[b].slice(0, mine.begin - own.begin, mine.end - own.begin));
    }
  }
  for (auto& p : params_) p.release_storage();  // a model built whole (model.init_from) keeps nothing here
  {
    TagScope tag(MemTag::comm);
    for (int k = 0; k < 2; ++k) recv_slots_.push_back(Tensor::empty({largest}, pol.comm_dtype, device()));
  }
  optim_ = std::make_unique<OptimShard>(plan_, opts_.optimizer, s, [this](size_t b) { return param_bufs_[b]; });
}

std::string ParamServer::label(const std::string& what) const {
  return "step " + std::to_string(steps_ + 1) + ", " + what;
}

// An input goes up to the device, and a float one takes the working dtype, as the engine's.
Tensor ParamServer::input(const Tensor& host) const {
  ZT_CHECK(!is_server(), "[ps] rank ", group_->rank(), " is a parameter server: it does not run the model");
  const Tensor x = host.to(device());
  const DType dt = plan_.policy.param_dtype;
  return is_floating(x.dtype()) && x.dtype() != dt ? ops::cast(x, dt) : x;
}

Tensor ParamServer::forward(const Tensor& x) { return model_(input(x)); }

Tensor ParamServer::forward(const std::vector<Tensor>& inputs) {
  std::vector<Tensor> in;
  for (const Tensor& x : inputs) in.push_back(input(x));
  return model_(in);
}

void ParamServer::backward(const Tensor& loss) {
  ZT_CHECK(!is_server(), "[ps] rank ", group_->rank(), " is a parameter server: it has no loss");
  const int64_t gas = opts_.gradient_accumulation_steps;
  ZT_CHECK(micro_ < gas, "[ps] backward() called ", micro_ + 1, " times since the last step(); ",
           "gradient_accumulation_steps is ", gas);
  ++micro_;
  autograd::backward(gas != 1 ? ag::scale(loss, float(1.0 / double(gas))) : loss);
}

StepStats ParamServer::step(double lr) {
  StepStats st = is_server() ? server_step(lr) : worker_step();
  ++steps_;
  return st;
}

// Push every range to its server, take part in the norm, pull the updated ranges back.
StepStats ParamServer::worker_step() {
  const int64_t gas = opts_.gradient_accumulation_steps;
  ZT_CHECK(micro_ == gas, "[ps] step() needs ", gas, " backward() call", gas == 1 ? "" : "s",
           " since the last step, got ", micro_);
  micro_ = 0;
  const DType wire = plan_.policy.comm_dtype;
  std::vector<comm::WorkPtr> pushes, pulls;
  std::vector<Tensor> out;
  for (size_t b = 0; b < plan_.buffers.size(); ++b) {
    for (auto& s : plan_.buffers[b].params)  // Note [stale gradient slots]: a slot no gradient reached
      if (autograd::grad_zeroed(params_[s.index])) grad_bufs_[b].slice(0, s.offset, s.offset + s.numel).zero_();
    TagScope tag(MemTag::comm);
    out.push_back(grad_bufs_[b].dtype() == wire ? grad_bufs_[b] : ops::cast(grad_bufs_[b], wire));
    for (int s = 0; s < servers_; ++s) {
      const Range r = plan_.optim_range(b, s);
      pushes.push_back(
          pushes_->send_async(out[b].slice(0, r.begin, r.end), s, label("push of buffer " + std::to_string(b))));
    }
  }
  StepStats st;
  st.set_norm(group_->all_reduce_double(0.0, label("gradient norm")), opts_.gradient_clipping);
  for (size_t b = 0; b < plan_.buffers.size(); ++b)
    for (int s = 0; s < servers_; ++s) {
      const Range r = plan_.optim_range(b, s);
      Tensor dst = param_bufs_[b].slice(0, r.begin, r.end);
      pulls.push_back(pushes_->recv_async(dst, s, label("pull of buffer " + std::to_string(b))));
    }
  for (auto& w : pushes) {
    w->wait();
    st.reduce.add(*w);
  }
  for (auto& w : pulls) {
    w->wait();
    st.gather.add(*w);
  }
  for (auto& p : params_) autograd::mark_grad_zeroed(p);  // the values stay; the next gradients write over them
  return st;
}

// Sum the W pushes of each range in worker order (two receive buffers: the next push arrives
// while one is added), average, clip by the global norm, update, send the range to every worker.
StepStats ParamServer::server_step(double lr) {
  const int W = workers();
  StepStats st;
  double sumsq = 0;
  for (size_t b = 0; b < plan_.buffers.size(); ++b) {
    Tensor& sum = grad_bufs_[b];
    const int64_t n = sum.numel();
    const std::string what = label("push of buffer " + std::to_string(b));
    std::vector<comm::WorkPtr> in(static_cast<size_t>(W));
    auto post = [&](int w) {
      Tensor slot = recv_slots_[size_t(w % 2)].slice(0, 0, n);
      in[size_t(w)] = pushes_->recv_async(slot, servers_ + w, what);
    };
    for (int w = 0; w < std::min(W, 2); ++w) post(w);
    for (int w = 0; w < W; ++w) {
      in[size_t(w)]->wait();
      st.reduce.add(*in[size_t(w)]);
      const Tensor got = recv_slots_[size_t(w % 2)].slice(0, 0, n);
      if (w == 0)
        ops::cast_into(sum, got);
      else
        ops::add_(sum, got);
      if (w + 2 < W) post(w + 2);
    }
    if (W > 1) ops::scale_(sum, float(1.0 / double(W)));
    sumsq += ops::sum_of_squares(sum);
  }
  st.set_norm(group_->all_reduce_double(sumsq, label("gradient norm")), opts_.gradient_clipping);
  std::vector<comm::WorkPtr> out;
  for (size_t b = 0; b < plan_.buffers.size(); ++b) {
    optim_->update(b, param_bufs_[b], grad_bufs_[b], float(lr), float(st.clip_coef));
    for (int w = 0; w < W; ++w)
      out.push_back(pushes_->send_async(param_bufs_[b], servers_ + w, label("pull of buffer " + std::to_string(b))));
  }
  optim_->finish_step();
  for (auto& w : out) {
    w->wait();
    st.gather.add(*w);
  }
  return st;
}

void ParamServer::for_each_full_param(const std::function<void(const std::string&, const Tensor&)>& fn) {
  const int rank = group_->rank(), first = servers_;
  auto one = [&](const std::string& name, const Tensor& p) {
    if (rank == 0) {
      Tensor t = Tensor::empty(p.shape(), plan_.policy.param_dtype, MemTag::workspace);
      group_->recv(t, first, "weights of " + name);
      fn(name, t);
    } else if (rank == first) {
      const Tensor host = p.to(Device::cpu());  // the host's group carries it; the caller writes it
      group_->send(host, 0, "weights of " + name);
      fn(name, host);
    }
  };
  for (size_t i = 0; i < params_.size(); ++i) one(names_[i], params_[i]);
  for (size_t i = 0; i < frozen_.size(); ++i) one(frozen_names_[i], frozen_[i]);
}

std::vector<std::pair<std::string, Shape>> ParamServer::full_param_shapes() const {
  std::vector<std::pair<std::string, Shape>> out;
  for (size_t i = 0; i < params_.size(); ++i) out.emplace_back(names_[i], params_[i].shape());
  for (size_t i = 0; i < frozen_.size(); ++i) out.emplace_back(frozen_names_[i], frozen_[i].shape());
  return out;
}

}  // namespace zt::zero
