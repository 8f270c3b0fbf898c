#include <cmath>

#include "zt/autograd/autograd.h"
#include "zt/autograd/functions.h"
#include "zt/nn/module.h"

namespace zt::nn {

Tensor Module::operator()(const Tensor& x) {
  if (pre_hook_) pre_hook_(*this);
  Tensor y = forward(x);
  return post_hook_ ? post_hook_(*this, y) : y;
}

void Module::collect(const std::string& prefix, std::vector<std::pair<std::string, Tensor>>& out) const {
  for (auto& [n, t] : params_) out.emplace_back(prefix + n, t);
  for (auto& [n, m] : children_) m->collect(prefix + n + ".", out);
}

std::vector<std::pair<std::string, Tensor>> Module::named_parameters() const {
  std::vector<std::pair<std::string, Tensor>> out;
  collect("", out);
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

void Module::register_module(const std::string& name, std::shared_ptr<Module> m) {
  children_.emplace_back(name, std::move(m));
}

Linear::Linear(int64_t in, int64_t out, bool has_bias, Generator& gen) {
  ZT_CHECK(in > 0 && out > 0, "[Linear] sizes must be positive, got in=", in, " out=", out);
  // kaiming_uniform_(a=sqrt(5)) reduces to U(-1/sqrt(fan_in), 1/sqrt(fan_in)), as does the bias.
  const float bound = 1.f / std::sqrt(float(in));
  int64_t n = 0;
  ZT_CHECK(!__builtin_mul_overflow(in, out, &n), "[Linear] in=", in, " times out=", out, " overflows int64");
  std::vector<float> w(static_cast<size_t>(n));
  for (auto& v : w) v = gen.uniform(-bound, bound);
  weight = register_parameter("weight", Tensor::from_vector(w, {out, in}));
  if (has_bias) {
    std::vector<float> b(static_cast<size_t>(out));
    for (auto& v : b) v = gen.uniform(-bound, bound);
    bias = register_parameter("bias", Tensor::from_vector(b, {out}));
  }
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
