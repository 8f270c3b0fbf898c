// The step order of docs/design.md ("One training step"); the state lives in the collaborators.
#include "zt/zero/engine.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "grad_reducer.h"
#include "model_layout.h"
#include "optim_shard.h"
#include "param_store.h"
#include "wire.h"
#include "zt/autograd/autograd.h"
#include "zt/autograd/functions.h"
#include "zt/nn/transformer.h"
#include "zt/ops/ops.h"
#include "zt/optim/clip.h"

namespace zt::zero {

void StepStats::set_norm(double sumsq, double max_norm) {
  grad_norm = std::sqrt(sumsq) / loss_scale;
  if (max_norm > 0) clip_coef = optim::clip_coefficient(grad_norm, max_norm);
}

void check_engine_options(const EngineOptions& o) {
  ZT_CHECK_AS(ErrorKind::config, o.gradient_accumulation_steps >= 1,
              "[zero] gradient_accumulation_steps must be >= 1, got ", o.gradient_accumulation_steps);
  if (o.device.is_cpu()) return;
  const auto& z = o.zero;
  // Named as the user wrote them, or as zero::place chose them.
  const Placement at = placement_of(o);
  const std::string par = o.placement ? offload_device(at.param) : z.offload_param.device;
  const std::string opt = o.placement ? offload_device(at.optimizer) : z.offload_optimizer.device;
  const bool params_off = medium_of(at.param) != Medium::compute;
  ZT_CHECK_AS(ErrorKind::config, !params_off || z.stage == 3, "[zero] offload_param.device = ", par,
              " needs zero_optimization.stage 3 (below it every rank holds all parameters), got stage ", z.stage);
  ZT_CHECK_AS(ErrorKind::config, !params_off || medium_of(at.optimizer) != Medium::compute,
              "[zero] zero_optimization.offload_param.device=", par, " with run.device=", o.device,
              " needs zero_optimization.offload_optimizer.device cpu or nvme (the host updates the parameters it "
              "holds), got '",
              opt, "'");
}

Engine::Engine(nn::Module& model, comm::GroupPtr group, EngineOptions opts)
    : model_(model), group_(std::move(group)), opts_(std::move(opts)) {
  ZT_CHECK(group_, "[zero] no process group");
  check_engine_options(opts_);
  ModelLayout m = layout_model(model_, opts_);
  params_ = std::move(m.params);
  names_ = std::move(m.names);
  frozen_ = std::move(m.frozen);
  frozen_names_ = std::move(m.frozen_names);
  units_ = std::move(m.units);
  borrowers_ = std::move(m.borrowers);
  m.policy.wire = plan_wire(opts_.zero, group_->size(), group_->local_size());  // Note [wire plan]
  plan_ = make_plan(m.input, m.policy, group_->size());
  const Policy& policy = plan_.policy;

  const Materialize materialize = initial_values(model_, "[zero]");
  // Frozen parameters: whole, in the param dtype's values and the dtype the model computes in.
  for (auto& p : frozen_) {
    TagScope tag(MemTag::param);
    Tensor t = Tensor::empty(p.shape(), policy.param_dtype, policy.device);
    materialize(p, 0, t.view({t.numel()}));
    if (policy.widens()) t = ops::cast(t, policy.compute_dtype);
    p.rebind(t.storage(), t.offset(), t.dtype());
  }
  // Swap files are made by every rank on its own disk: one agreed error if any rank cannot.
  // The buffers' collectives run on the device's tensors (staged through the host where the
  // backend cannot take them, Note [staged group]); group_ stays the host's, for scalars and votes.
  groups_ = std::make_unique<CommGroups>(make_comm_groups(comm::stage_on(group_, policy.device), policy.wire));
  std::string swap_error;
  try {
    store_ = std::make_unique<ParamStore>(plan_, params_, *groups_, step_limits(opts_), materialize);
    optim_ = std::make_unique<OptimShard>(plan_, opts_.optimizer, group_->rank(),
                                          [this](size_t b) { return store_->owned_copy(b); });
  } catch (const Error& e) {  // only the swap files' own failures (disk, folder) are per rank
    if (e.kind() != ErrorKind::checkpoint || !policy.swaps()) throw;
    swap_error = e.what();
  }
  if (policy.swaps())
    comm::agree_on_error(*group_, swap_error, label("swap files"), ErrorKind::checkpoint);
  reducer_ = std::make_unique<GradReducer>(
      plan_, params_, *groups_, step_limits(opts_), [this](size_t b) { store_->release(b); },
      [this](size_t b) {  // a swapped shard is read in only for its update
        optim_->take_gradient(b, plan_.param_swapped(b) ? Tensor() : store_->owned(b), reducer_->owned(b));
      });
  if (policy.loss_scaling) scaler_ = std::make_unique<optim::LossScaler>(opts_.fp16);
  if (policy.shard_parameters()) install_unit_hooks();
}

Engine::~Engine() {
  for (nn::Module* u : units_) {
    u->set_pre_hook(nullptr);
    u->set_post_hook(nullptr);
  }
  for (auto& br : borrowers_) {
    br.module->set_pre_hook(nullptr);
    br.module->set_post_hook(nullptr);
  }
}

std::string Engine::label(const std::string& what) const { return "step " + std::to_string(steps_ + 1) + ", " + what; }

double Engine::loss_scale() const { return scaler_ ? scaler_->scale() : 1.0; }

SparseCommBytes Engine::sparse_comm_bytes() const { return reducer_->sparse_bytes(); }

uint64_t Engine::comm_bytes() const { return groups_->bytes(); }

uint64_t Engine::cross_node_bytes() const { return groups_->cross_node_bytes(); }

std::string Engine::zeropp_summary() const {
  const WirePlan& w = plan_.policy.wire;
  std::string s;
  auto add = [&s](const std::string& part) { s += (s.empty() ? "" : ", ") + part; };
  if (w.int8_weights) add("int8 weights");
  if (opts_.zero.zero_quantized_gradients)
    add(w.gradient_bits > 0
            ? "int" + std::to_string(w.gradient_bits) + " gradients across " + std::to_string(w.nodes) + " nodes"
            : "gradients dense (one node: nothing crosses)");
  if (groups_->secondary) add("backward gathers over " + std::to_string(groups_->secondary->size()) + " ranks");
  return s;
}

// Stage 3: a unit is gathered before its forward (the next ones prefetched) and released after
// it; when backward reaches the unit it is gathered again; the reducer releases it once its
// gradient is reduce-scattered. A module with a tied weight gathers the unit owning it the same way.
void Engine::install_unit_hooks() {
  // own: the unit's buffer (-1 for a module that only borrows); bufs: own first, then borrowed.
  auto hook = [this](nn::Module* m, int64_t own, std::vector<size_t> bufs) {
    const std::string what = own >= 0 ? "unit " + std::to_string(own) : std::string("tied weight of ") + m->type_name();
    m->set_pre_hook([this, own, bufs, what](nn::Module&) {
      for (size_t b : bufs) store_->gather(b, true, label("all-gather of " + what));
      // An activation-checkpoint recompute runs inside backward: the units after it are done.
      if (own >= 0 && !nn::recomputing()) store_->prefetch(size_t(own), +1, label("prefetch"));
    });
    m->set_post_hook([this, own, bufs, what](nn::Module&, const Tensor& out) {
      Tensor y = out;
      if (autograd::grad_enabled() && autograd::requires_grad(out))
        y = autograd::on_backward(out, [this, own, bufs, what] {
          for (size_t b : bufs) store_->gather(b, true, label("backward all-gather of " + what));
          if (own >= 0) store_->prefetch(size_t(own), -1, label("prefetch"));
        });
      // A recompute's backward follows at once: keep the unit (the reducer releases it).
      if (!nn::recomputing())
        for (size_t b : bufs) store_->release(b);
      return y;
    });
  };
  for (size_t ui = 0; ui < units_.size(); ++ui) {
    std::vector<size_t> bufs{ui};
    for (auto& br : borrowers_)
      if (br.module == units_[ui]) bufs.insert(bufs.end(), br.buffers.begin(), br.buffers.end());
    hook(units_[ui], int64_t(ui), bufs);
  }
  for (auto& br : borrowers_)
    if (std::find(units_.begin(), units_.end(), br.module) == units_.end()) hook(br.module, -1, br.buffers);
}

Tensor Engine::forward(const Tensor& x) { return forward(std::vector<Tensor>{x}); }

Tensor Engine::forward(const std::vector<Tensor>& inputs) {
  store_->begin_forward(autograd::grad_enabled());
  const DType dt = plan_.policy.compute_dtype;
  std::vector<Tensor> in;
  in.reserve(inputs.size());
  for (const Tensor& host : inputs) {
    const Tensor x = host.to(plan_.policy.device);
    in.push_back(is_floating(x.dtype()) && x.dtype() != dt ? ops::cast(x, dt) : x);
  }
  return in.size() == 1 ? model_(in[0]) : model_(in);
}

// Note [host update overlap]: behind backward where the host updates beside a device; where
// clipping or fp16 may change the scale, speculatively and only after a step whose scale was the
// expected one (a run that clips every step would redo every update).
void Engine::begin_step(double lr) {
  const Policy& pol = plan_.policy;
  const bool scaled = scaler_ || opts_.gradient_clipping > 0;
  const bool early = !pol.device.is_cpu() && pol.optimizer_medium() == Medium::host &&
                     pol.param_medium() != Medium::files && (!scaled || (pol.snapshot_host_update && !last_scaled_));
  if (!early) return optim_->begin_step(std::nullopt);
  const double ls = loss_scale();  // the step's grad_scale below where the clip coefficient is 1
  optim_->begin_step(OptimShard::EarlyStep{float(lr), ls == 1.0 ? 1.0f : float(1.0 / ls), scaled});
}

void Engine::backward(const Tensor& loss) {
  const int64_t gas = opts_.gradient_accumulation_steps;
  ZT_CHECK(micro_ < gas, "[zero] backward() called ", micro_ + 1, " times since the last step(); ",
           "gradient_accumulation_steps is ", gas);
  ++micro_;
  reducer_->begin_backward(micro_ == gas, label("micro-batch " + std::to_string(micro_)));
  const double s = loss_scale() / double(gas);
  autograd::backward(s != 1.0 ? ag::scale(loss, float(s)) : loss);
  reducer_->end_backward();
}

StepStats Engine::step(double lr) {
  const int64_t gas = opts_.gradient_accumulation_steps;
  ZT_CHECK(micro_ == gas, "[zero] step() needs ", gas, " backward() call", gas == 1 ? "" : "s",
           " since the last step, got ", micro_);
  micro_ = 0;
  const Policy& pol = plan_.policy;
  const size_t nb = plan_.buffers.size();
  StepStats st;
  st.reduce = reducer_->take_overlap();
  st.gather = store_->take_overlap();
  st.gathers = store_->gathers() - gathers_at_step_;
  gathers_at_step_ = store_->gathers();
  store_->end_step();
  st.loss_scale = loss_scale();
  // One pass over this rank's gradients: squares summed in double stay finite for any finite f32,
  // bf16 or f16 value, so a non-finite sum is exactly fp16's overflow (an inf or NaN gradient).
  double sumsq = 0;
  {  // each buffer's sum stays on the device; the host reads them all at once, then adds in order
    const Tensor host = reducer_->sums_of_squares().to(Device::cpu());
    for (size_t b = 0; b < nb; ++b) sumsq += static_cast<const double*>(host.raw_data())[b];
  }
  if (scaler_) {  // fp16: an overflow on any rank skips the step on every rank
    bool overflow = !std::isfinite(sumsq);
    comm::CollOptions o;
    o.op = comm::ReduceOp::max;
    o.label = label("overflow check");
    overflow = group_->all_reduce_scalar(overflow ? 1.0 : 0.0, o) > 0;
    last_scaled_ = overflow;
    if (overflow) optim_->discard_step([this](size_t b) { return store_->owned(b); });
    scaler_->update(overflow);  // throws below the minimum scale
    if (overflow) {
      st.skipped = true;
      reducer_->zero();
      return st;
    }
  }
  if (pol.shard_optimizer()) {  // each rank holds one shard of the gradient
    comm::CollOptions o;
    o.label = label("gradient norm");
    sumsq = group_->all_reduce_double(sumsq, o);
  }
  st.set_norm(sumsq, opts_.gradient_clipping);
  last_scaled_ = st.clip_coef != 1.0;
  // Unscaling and clipping folded into the update (one pass over the gradients).
  const float grad_scale = st.loss_scale == 1.0 ? float(st.clip_coef) : float(st.clip_coef / st.loss_scale);
  try {
    for (size_t b = 0; b < nb; ++b) {
      if (optim_->update(b, store_->owned(b), reducer_->owned(b), float(lr), grad_scale, store_->owned_compute(b)))
        store_->widened_by_update(b);
      store_->publish(b, label("parameter all-gather, bucket " + std::to_string(b)));
    }
  } catch (...) {  // no host update still running past a failed step (Note [host update overlap])
    optim_->discard_step([this](size_t b) { return store_->owned(b); });
    throw;
  }
  store_->finish_publish();
  store_->refresh_compute(/*after_update=*/true);
  reducer_->zero();
  optim_->finish_step();
  ++steps_;
  return st;
}

void Engine::for_each_full_param(const std::function<void(const std::string&, const Tensor&)>& fn) {
  if (!plan_.policy.shard_parameters()) {  // all gathered: model order
    std::vector<size_t> buffer_of(params_.size());
    for (size_t b = 0; b < plan_.buffers.size(); ++b)
      for (auto& s : plan_.buffers[b].params) buffer_of[s.index] = b;
    for (size_t i = 0; i < params_.size(); ++i) fn(names_[i], store_->full_param(buffer_of[i], i));
  } else {  // one unit at a time (units are in model order)
    for (size_t b = 0; b < plan_.buffers.size(); ++b) {
      store_->gather(b, true, label("consolidation of unit " + std::to_string(b)));
      for (auto& s : plan_.buffers[b].params) fn(names_[s.index], store_->full_param(b, s.index));
      store_->release(b, /*may_keep=*/false);
    }
  }
  const DType dt = plan_.policy.param_dtype;  // saved as the trainable ones are
  for (size_t i = 0; i < frozen_.size(); ++i)
    fn(frozen_names_[i], frozen_[i].dtype() == dt ? frozen_[i] : ops::cast(frozen_[i], dt));
}

std::vector<std::pair<std::string, Shape>> Engine::full_param_shapes() const {
  std::vector<std::pair<std::string, Shape>> out;
  if (!plan_.policy.shard_parameters()) {
    for (size_t i = 0; i < params_.size(); ++i) out.emplace_back(names_[i], params_[i].shape());
  } else {
    for (auto& b : plan_.buffers)
      for (auto& s : b.params) out.emplace_back(names_[s.index], params_[s.index].shape());
  }
  for (size_t i = 0; i < frozen_.size(); ++i) out.emplace_back(frozen_names_[i], frozen_[i].shape());
  return out;
}

std::vector<ShardState> Engine::shard_states() {
  std::vector<ShardState> out;
  for (size_t b = 0; b < plan_.buffers.size(); ++b) {
    const Range r = plan_.optim_range(b, group_->rank());
    ShardState s{b, r.begin, r.size(), {store_->owned_state(b)}};
    for (auto& t : optim_->state(b)) s.tensors.push_back(std::move(t));
    out.push_back(std::move(s));
  }
  return out;
}

SwapStats Engine::swap_stats() const {
  SwapStats st = optim_->swap_stats();
  return st += store_->swap_stats();
}

Engine::Counters Engine::counters() const {
  Counters c;
  c.optimizer_steps = steps_;
  if (scaler_) c.loss_scaler = scaler_->state();
  return c;
}

void Engine::load_counters(const Counters& c) {
  ZT_CHECK(c.optimizer_steps >= 0, "[zero] optimizer step count must be >= 0, got ", c.optimizer_steps);
  ZT_CHECK(micro_ == 0, "[zero] counters can only be loaded between steps");
  steps_ = c.optimizer_steps;
  optim_->set_steps(c.optimizer_steps);
  if (scaler_ && c.loss_scaler) scaler_->load(*c.loss_scaler);
}

void Engine::refresh_params() {
  for (size_t b = 0; b < plan_.buffers.size(); ++b)
    store_->publish(b, label("parameter refresh, buffer " + std::to_string(b)));
  store_->finish_publish();
  store_->refresh_compute(/*after_update=*/false);
}

}  // namespace zt::zero

namespace zt::zero {

ShardTensor ShardTensor::in_memory(std::string name, const Tensor& t) {
  ShardTensor s;
  s.name = std::move(name);
  s.dtype = t.dtype();
  s.numel = t.numel();
  s.tensor = t;
  return s;
}

void ShardTensor::read(int64_t begin, int64_t n, void* dst) const {
  ZT_ASSERT(begin >= 0 && n >= 0 && begin + n <= numel, "shard tensor ", name, " range");
  if (!streamed()) {
    Tensor host = tensor.slice(0, begin, begin + n);
    if (!host.device().is_cpu()) {  // a device's range comes down through pinned memory (the caller's chunk)
      host = Tensor::empty_pinned({n}, dtype, MemTag::workspace);
      host.copy_(tensor.slice(0, begin, begin + n));
    }
    return void(std::memcpy(dst, host.raw_data(), size_t(n) * dtype_size(dtype)));
  }
  read_fn(begin, n, dst);
}

void ShardTensor::write(int64_t begin, int64_t n, const void* src) const {
  ZT_ASSERT(begin >= 0 && n >= 0 && begin + n <= numel, "shard tensor ", name, " range");
  if (!streamed()) {
    Tensor dst = tensor.slice(0, begin, begin + n);
    if (dst.device().is_cpu()) return void(std::memcpy(dst.raw_data(), src, size_t(n) * dtype_size(dtype)));
    Tensor host = Tensor::empty_pinned({n}, dtype, MemTag::workspace);  // up through pinned memory
    std::memcpy(host.raw_data(), src, size_t(n) * dtype_size(dtype));
    return dst.copy_(host);
  }
  write_fn(begin, n, src);
}

void ShardTensor::zero() const {
  if (!streamed()) {
    Tensor t = tensor;
    return t.zero_();
  }
  const int64_t chunk = int64_t(1) << 20;
  const std::vector<char> zeros(size_t(std::min(chunk, numel)) * dtype_size(dtype), 0);
  for (int64_t b = 0; b < numel; b += chunk) write_fn(b, std::min(chunk, numel - b), zeros.data());
}

}  // namespace zt::zero
