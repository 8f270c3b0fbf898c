#include <cmath>
#include <unordered_set>

#include "zt/autograd/autograd.h"
#include "zt/autograd/functions.h"
#include "zt/core/parallel.h"
#include "zt/nn/module.h"

namespace zt::nn {

namespace {
thread_local bool t_deferred = false;
}  // namespace

DeferredInit::DeferredInit() : prev_(t_deferred) { t_deferred = true; }
DeferredInit::~DeferredInit() { t_deferred = prev_; }
bool deferred_init_enabled() { return t_deferred; }

Tensor Module::hooked(const std::function<Tensor()>& run) {
  if (pre_hook_) pre_hook_(*this);
  Tensor y = run();
  return post_hook_ ? post_hook_(*this, y) : y;
}

Tensor Module::operator()(const Tensor& x) {
  return hooked([&] { return forward(x); });
}

Tensor Module::operator()(const std::vector<Tensor>& inputs) {
  return hooked([&] { return forward_inputs(inputs); });
}

Tensor Module::forward_inputs(const std::vector<Tensor>& inputs) {
  ZT_CHECK(inputs.size() == 1, "[nn] ", type_name(), " takes one input, got ", inputs.size());
  return forward(inputs[0]);
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [n, m] : children_) m->train(on);
}

void Module::collect(const std::string& prefix, std::vector<std::pair<std::string, Tensor>>& out) const {
  for (auto& [n, t] : params_) out.emplace_back(prefix + n, t);
  for (auto& [n, m] : children_) m->collect(prefix + n + ".", out);
}

// A tensor registered under two names (a tied weight) is listed once, under its first name,
// as torch's named_parameters() does.
void Module::to(Device device) {
  for (Tensor& p : parameters()) p.move_to(device);
}

std::vector<std::pair<std::string, Tensor>> Module::named_parameters() const {
  std::vector<std::pair<std::string, Tensor>> all, out;
  collect("", all);
  std::unordered_set<const TensorImpl*> seen;
  for (auto& nt : all)
    if (seen.insert(nt.second.impl()).second) out.push_back(std::move(nt));
  return out;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& [n, t] : named_parameters()) out.push_back(t);
  return out;
}

std::vector<Module*> Module::parameter_owners() {
  std::vector<Module*> out;
  if (!params_.empty()) out.push_back(this);
  for (auto& [n, m] : children_)
    for (Module* o : m->parameter_owners()) out.push_back(o);
  return out;
}

std::vector<Module*> Module::zero_units() {
  if (zero_unit_) return {this};
  std::vector<Module*> out;
  if (!params_.empty()) out.push_back(this);
  for (auto& [n, m] : children_)
    for (Module* u : m->zero_units()) out.push_back(u);
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::unit_parameters() const {
  return zero_unit_ ? named_parameters() : params_;
}

int64_t Module::num_parameters() const {
  int64_t n = 0;
  for (auto& [name, t] : named_parameters()) n += t.numel();
  return n;
}

Tensor Module::register_parameter(const std::string& name, Tensor t) {
  autograd::set_requires_grad(t, true);
  params_.emplace_back(name, t);
  return t;
}

Tensor Module::register_parameter(const std::string& name, const Shape& shape, Init init) {
  if (!t_deferred) {
    Tensor t = Tensor::empty(shape, DType::f32);
    run_init(init, t, 0);
    return register_parameter(name, t);
  }
  Tensor t = register_parameter(name, Tensor::unallocated(shape, DType::f32));
  deferred_.emplace_back(t.impl(), std::move(init));
  return t;
}

std::unordered_map<const TensorImpl*, Init> Module::deferred_initializers() const {
  std::unordered_map<const TensorImpl*, Init> out;
  for (auto& [impl, init] : deferred_) out.emplace(impl, init);
  for (auto& [n, m] : children_)
    for (auto& kv : m->deferred_initializers()) out.insert(kv);
  return out;
}

void Module::register_module(const std::string& name, std::shared_ptr<Module> m) {
  children_.emplace_back(name, std::move(m));
}

void run_init(const Init& init, Tensor& out, int64_t begin) {
  ZT_CHECK(out.device().is_cpu() && out.dtype() == DType::f32 && out.is_contiguous(),
           "[nn] run_init fills host f32 contiguous memory, got ", dtype_name(out.dtype()), " on ", out.device().str());
  float* p = out.data<float>();
  parallel_for(out.numel(), int64_t(1) << 15, [&](int64_t b, int64_t e) { init(p + b, begin + b, begin + e); });
}

Init uniform_init(Generator& gen, float bound) {
  return [key = gen.next_u64(), bound](float* out, int64_t begin, int64_t end) {
    counter_uniform(key, -bound, bound, out, begin, end);
  };
}

Linear::Linear(int64_t in, int64_t out, bool has_bias, Generator& gen) {
  ZT_CHECK(in > 0 && out > 0, "[Linear] sizes must be positive, got in=", in, " out=", out);
  int64_t n = 0;
  ZT_CHECK(!__builtin_mul_overflow(in, out, &n), "[Linear] in=", in, " times out=", out, " overflows int64");
  const float bound = 1.f / std::sqrt(float(in));
  weight = register_parameter("weight", {out, in}, uniform_init(gen, bound));
  if (has_bias) bias = register_parameter("bias", {out}, uniform_init(gen, bound));
}

Linear::Linear(int64_t in, int64_t out, bool has_bias, Init weight_init, Init bias_init) {
  ZT_CHECK(in > 0 && out > 0, "[Linear] sizes must be positive, got in=", in, " out=", out);
  weight = register_parameter("weight", {out, in}, std::move(weight_init));
  if (has_bias) bias = register_parameter("bias", {out}, std::move(bias_init));
}

Linear::Linear(Tensor tied_weight) {
  ZT_CHECK(tied_weight.defined() && tied_weight.dim() == 2, "[Linear] a tied weight must be 2-D");
  weight = register_parameter("weight", std::move(tied_weight));
}

Tensor Linear::forward(const Tensor& x) { return ag::linear(x, weight, bias.defined() ? &bias : nullptr); }

Activation::Activation(std::string kind) : kind_(std::move(kind)) {
  ZT_CHECK(kind_ == "relu" || kind_ == "gelu", "[nn] unknown activation '", kind_, "' (allowed: relu, gelu)");
}

Tensor Activation::forward(const Tensor& x) { return kind_ == "relu" ? ag::relu(x) : ag::gelu(x); }

void Sequential::add(std::shared_ptr<Module> m) {
  order_.push_back(m.get());
  register_module(std::to_string(order_.size() - 1), std::move(m));
}

Tensor Sequential::forward(const Tensor& x) {
  Tensor h = x;
  for (Module* m : order_) h = (*m)(h);
  return h;
}

std::shared_ptr<Module> make_mlp(int64_t input, const std::vector<int64_t>& hidden, int64_t classes,
                                 const std::string& activation, uint64_t seed) {
  Generator gen(seed);
  TagScope tag(MemTag::param);
  auto layers = std::make_shared<Sequential>();
  int64_t prev = input;
  for (int64_t h : hidden) {
    layers->add(std::make_shared<Linear>(prev, h, true, gen));
    layers->add(std::make_shared<Activation>(activation));
    prev = h;
  }
  layers->add(std::make_shared<Linear>(prev, classes, true, gen));
  return layers;
}

}  // namespace zt::nn
