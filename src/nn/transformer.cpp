#include <cmath>

#include "zt/autograd/autograd.h"
#include "zt/autograd/functions.h"
#include "zt/autograd/layers.h"
#include "zt/nn/transformer.h"
#include "zt/core/splitmix.h"

namespace zt::nn {

Init normal_init(Generator& gen, float stddev) {
  return [key = gen.next_u64(), stddev](float* out, int64_t begin, int64_t end) {
    counter_normal(key, 0.f, stddev, out, begin, end);
  };
}

Init constant_init(float value) {
  return [value](float* out, int64_t begin, int64_t end) { std::fill(out, out + (end - begin), value); };
}

namespace {
thread_local uint64_t t_dropout_base = 0, t_dropout_pos = 0;
thread_local bool t_recomputing = false;

}  // namespace

void set_dropout_stream(uint64_t base) {
  t_dropout_base = base;
  t_dropout_pos = 0;
}
uint64_t next_dropout_seed() { return splitmix64(t_dropout_base ^ splitmix64(t_dropout_pos++)); }
uint64_t dropout_stream_position() { return t_dropout_pos; }
void set_dropout_stream_position(uint64_t pos) { t_dropout_pos = pos; }

Tensor position_ids(int64_t T, Device device) {
  std::vector<int32_t> v(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) v[size_t(t)] = int32_t(t);
  return Tensor::from_ints(v, {T}, device);
}

void ModuleList::add(std::shared_ptr<Module> m) {
  items_.push_back(m.get());
  register_module(std::to_string(items_.size() - 1), std::move(m));
}

Tensor ModuleList::forward(const Tensor&) { ZT_THROW("[nn] a ModuleList is not called; call its items"); }

Embedding::Embedding(int64_t num, int64_t dim, Init init) {
  ZT_CHECK(num > 0 && dim > 0, "[Embedding] sizes must be positive, got ", num, " x ", dim);
  weight = register_parameter("weight", {num, dim}, std::move(init));
}

Tensor Embedding::forward(const Tensor& ids) { return ag::embedding(weight, ids); }

LayerNorm::LayerNorm(int64_t dim, float eps) : eps_(eps) {
  ZT_CHECK(dim > 0, "[LayerNorm] size must be positive, got ", dim);
  weight = register_parameter("weight", {dim}, constant_init(1.f));
  bias = register_parameter("bias", {dim}, constant_init(0.f));
}

Tensor LayerNorm::forward(const Tensor& x) { return ag::layer_norm(x, weight, bias, eps_); }

ag::AddNorm LayerNorm::add_norm(const Tensor& x, const Tensor& r) {
  Tensor sum;
  Tensor y = hooked([&] {
    ag::AddNorm a = ag::add_layer_norm(x, r, weight, bias, eps_);
    sum = a.sum;
    return a.y;
  });
  return {sum, y};
}

Dropout::Dropout(float p) : p_(p) { ZT_CHECK(p >= 0.f && p < 1.f, "[Dropout] probability must be in [0, 1), got ", p); }

Tensor Dropout::forward(const Tensor& x) {
  if (!is_training() || p_ == 0.f) return x;
  return ag::dropout(x, p_, next_dropout_seed());
}

// Note [activation checkpointing]: the child runs without a graph; one node keeps its inputs.
// Its backward rewinds the dropout stream, reruns the child with recording on (a stage-3 unit
// gathers again through its hooks), and backpropagates the incoming gradient through the
// fresh graph; parameter gradients land in their leaves (and grad-ready hooks fire) there.
Tensor checkpointed(Module& child, const std::vector<Tensor>& inputs) {
  if (!autograd::grad_enabled()) return child(inputs);
  const uint64_t pos = dropout_stream_position();
  Tensor out;
  {
    autograd::NoGradGuard no_grad;
    out = child(inputs);
  }
  return autograd::record(out, inputs, "checkpoint", [&child, inputs, pos](const Tensor& g) {
    const uint64_t resume = dropout_stream_position();
    set_dropout_stream_position(pos);
    std::vector<Tensor> fresh;  // the same values, as leaves of the recomputed graph
    for (const Tensor& in : inputs) {
      if (!in.defined() || !autograd::requires_grad(in)) {
        fresh.push_back(in);
        continue;
      }
      Tensor leaf = autograd::detached(in);
      autograd::set_requires_grad(leaf, true);
      fresh.push_back(leaf);
    }
    Tensor y;
    {
      autograd::EnableGradGuard record_again;
      const bool outer = t_recomputing;
      t_recomputing = true;
      try {
        y = child(fresh);
      } catch (...) {
        t_recomputing = outer;
        throw;
      }
      t_recomputing = outer;
    }
    autograd::backward(y, g);
    set_dropout_stream_position(resume);
    std::vector<Tensor> grads;
    for (size_t i = 0; i < inputs.size(); ++i)
      grads.push_back(fresh[i].same(inputs[i]) ? Tensor() : autograd::grad(fresh[i]));
    return grads;
  });
}

bool recomputing() { return t_recomputing; }

void TransformerConfig::validate(const char* model) const {
  auto positive = [&](int64_t v, const char* key) {
    ZT_CHECK_AS(ErrorKind::config, v > 0, "[", model, "] model.", key, " must be positive, got ", v);
  };
  positive(vocab_size, "vocab_size");
  positive(block_size, "block_size");
  positive(n_layer, "n_layer");
  positive(n_head, "n_head");
  positive(n_embd, "n_embd");
  ZT_CHECK_AS(ErrorKind::config, n_embd % n_head == 0, "[", model, "] model.n_embd ", n_embd,
              " must be a multiple of model.n_head ", n_head);
  ZT_CHECK_AS(ErrorKind::config, dropout >= 0.f && dropout < 1.f, "[", model, "] model.dropout must be in [0, 1), got ",
              dropout);
}

}  // namespace zt::nn
