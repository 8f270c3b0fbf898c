#include "zt/optim/optimizer.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include "zt/core/error.h"
#include "zt/core/parallel.h"

namespace zt::optim {
namespace {

std::string lower(std::string s) {
  for (auto& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Per-step scalars, computed in double from the float spec as torch does with Python floats,
// then rounded to float where torch passes them to a float kernel.
struct AdamScalars {
  float beta1, one_minus_beta1, beta2, one_minus_beta2, eps;
  float bias_correction2_sqrt, neg_step_size;
  float l2;     // Adam: grad += l2 * param
  float decay;  // AdamW: param *= decay (1 - lr * wd)
};

// Same operation order as torch 1.13 _single_tensor_adam(w):
//   m = m*b1 + (1-b1)*g;  v = v*b2 + ((1-b2)*g)*g;  denom = sqrt(v)/bc2_sqrt + eps;
//   p = p + (-step_size*m)/denom
template <bool kL2, bool kDecoupled>
void adam_kernel(float* __restrict p, const float* __restrict g, float* __restrict m,
                 float* __restrict v, int64_t n, const AdamScalars s) {
  for (int64_t i = 0; i < n; ++i) {
    float gi = g[i];
    float pi = p[i];
    if constexpr (kL2) gi = gi + s.l2 * pi;
    if constexpr (kDecoupled) pi = pi * s.decay;
    float mi = m[i] * s.beta1 + s.one_minus_beta1 * gi;
    float vi = v[i] * s.beta2 + s.one_minus_beta2 * gi * gi;
    float denom = std::sqrt(vi) / s.bias_correction2_sqrt + s.eps;
    m[i] = mi;
    v[i] = vi;
    p[i] = pi + s.neg_step_size * mi / denom;
  }
}

class AdamOptimizer final : public FlatOptimizer {
 public:
  AdamOptimizer(const OptimizerSpec& spec, int64_t n, bool decoupled)
      : FlatOptimizer(spec, n), decoupled_(decoupled), m_(make_state(n)), v_(make_state(n)) {
    state_bytes_ = m_.nbytes() + v_.nbytes();
  }

  void step(float* params, const float* grads, float lr) override {
    ++steps_;
    const double b1 = spec_.beta1, b2 = spec_.beta2, dlr = lr, wd = spec_.weight_decay;
    const double step = double(steps_);
    AdamScalars s;
    s.beta1 = spec_.beta1;
    s.one_minus_beta1 = float(1.0 - b1);
    s.beta2 = spec_.beta2;
    s.one_minus_beta2 = float(1.0 - b2);
    s.eps = spec_.eps;
    s.bias_correction2_sqrt = float(std::sqrt(1.0 - std::pow(b2, step)));
    s.neg_step_size = float(-(dlr / (1.0 - std::pow(b1, step))));
    s.l2 = spec_.weight_decay;
    s.decay = float(1.0 - dlr * wd);
    float* m = m_.data<float>();
    float* v = v_.data<float>();
    const bool l2 = !decoupled_ && wd != 0.0;
    parallel_for(n_, kOptimGrain, [&](int64_t b, int64_t e) {
      if (decoupled_)
        adam_kernel<false, true>(params + b, grads + b, m + b, v + b, e - b, s);
      else if (l2)
        adam_kernel<true, false>(params + b, grads + b, m + b, v + b, e - b, s);
      else
        adam_kernel<false, false>(params + b, grads + b, m + b, v + b, e - b, s);
    });
  }

  std::vector<std::pair<std::string, Tensor>> state() override {
    return {{"exp_avg", m_}, {"exp_avg_sq", v_}};
  }

 private:
  bool decoupled_;
  Tensor m_, v_;
};

// torch 1.13 _single_tensor_sgd with dampening 0:
//   d = g + wd*p;  buf = first ? d : buf*mom + d;  d = nesterov ? d + mom*buf : buf;
//   p = p + (-lr)*d
template <bool kWd, bool kFirst, bool kNesterov>
void sgd_momentum_kernel(float* __restrict p, const float* __restrict g, float* __restrict buf,
                         int64_t n, float wd, float mom, float neg_lr) {
  for (int64_t i = 0; i < n; ++i) {
    float d = g[i];
    if constexpr (kWd) d = d + wd * p[i];
    float b;
    if constexpr (kFirst) b = d;
    else b = buf[i] * mom + d;
    buf[i] = b;
    if constexpr (kNesterov) d = d + mom * b;
    else d = b;
    p[i] = p[i] + neg_lr * d;
  }
}

template <bool kWd>
void sgd_plain_kernel(float* __restrict p, const float* __restrict g, int64_t n, float wd,
                      float neg_lr) {
  for (int64_t i = 0; i < n; ++i) {
    float d = g[i];
    if constexpr (kWd) d = d + wd * p[i];
    p[i] = p[i] + neg_lr * d;
  }
}

class SgdOptimizer final : public FlatOptimizer {
 public:
  SgdOptimizer(const OptimizerSpec& spec, int64_t n) : FlatOptimizer(spec, n) {
    if (spec.momentum != 0.f) {
      buf_ = make_state(n);
      state_bytes_ = buf_.nbytes();
    }
  }

  // The momentum buffer is (re)initialised from the first gradient while steps() == 0, as
  // torch does lazily; after set_steps(k > 0) the loaded buffer is used as is.
  void step(float* params, const float* grads, float lr) override {
    const float wd = spec_.weight_decay, mom = spec_.momentum, neg_lr = float(-double(lr));
    const bool has_wd = wd != 0.f, first = steps_ == 0;
    ++steps_;
    if (!buf_.defined()) {
      parallel_for(n_, kOptimGrain, [&](int64_t b, int64_t e) {
        if (has_wd) sgd_plain_kernel<true>(params + b, grads + b, e - b, wd, neg_lr);
        else sgd_plain_kernel<false>(params + b, grads + b, e - b, wd, neg_lr);
      });
      return;
    }
    float* buf = buf_.data<float>();
    parallel_for(n_, kOptimGrain, [&](int64_t b, int64_t e) {
      dispatch(params + b, grads + b, buf + b, e - b, has_wd, first, spec_.nesterov, wd, mom, neg_lr);
    });
  }

  std::vector<std::pair<std::string, Tensor>> state() override {
    if (!buf_.defined()) return {};
    return {{"momentum_buffer", buf_}};
  }

 private:
  static void dispatch(float* p, const float* g, float* buf, int64_t n, bool wd_on, bool first,
                       bool nesterov, float wd, float mom, float neg_lr) {
    // 8 instantiations keep each inner loop branch-free, so gcc vectorises all of them.
    int key = (wd_on ? 4 : 0) | (first ? 2 : 0) | (nesterov ? 1 : 0);
    switch (key) {
      case 0: sgd_momentum_kernel<false, false, false>(p, g, buf, n, wd, mom, neg_lr); break;
      case 1: sgd_momentum_kernel<false, false, true>(p, g, buf, n, wd, mom, neg_lr); break;
      case 2: sgd_momentum_kernel<false, true, false>(p, g, buf, n, wd, mom, neg_lr); break;
      case 3: sgd_momentum_kernel<false, true, true>(p, g, buf, n, wd, mom, neg_lr); break;
      case 4: sgd_momentum_kernel<true, false, false>(p, g, buf, n, wd, mom, neg_lr); break;
      case 5: sgd_momentum_kernel<true, false, true>(p, g, buf, n, wd, mom, neg_lr); break;
      case 6: sgd_momentum_kernel<true, true, false>(p, g, buf, n, wd, mom, neg_lr); break;
      default: sgd_momentum_kernel<true, true, true>(p, g, buf, n, wd, mom, neg_lr); break;
    }
  }

  Tensor buf_;
};

void check_common(const OptimizerSpec& s, int64_t n) {
  ZT_CHECK(n >= 0, "[optim] shard size must be >= 0, got ", n);
  ZT_CHECK(std::isfinite(s.lr) && s.lr >= 0.f, "[optim] lr must be >= 0, got ", s.lr);
  ZT_CHECK(std::isfinite(s.weight_decay) && s.weight_decay >= 0.f,
           "[optim] weight_decay must be >= 0, got ", s.weight_decay);
}

}  // namespace

void FlatOptimizer::set_steps(int64_t s) {
  ZT_CHECK(s >= 0, "[optim] step count must be >= 0, got ", s);
  steps_ = s;
}

Tensor FlatOptimizer::make_state(int64_t n) {
  Tensor t = Tensor::empty({n}, DType::f32, MemTag::optim);
  if (n > 0) std::fill_n(t.data<float>(), n, 0.f);
  return t;
}

std::unique_ptr<FlatOptimizer> FlatOptimizer::create(const OptimizerSpec& spec, int64_t n) {
  const std::string t = lower(spec.type);
  check_common(spec, n);
  if (t == "adam" || t == "adamw") {
    ZT_CHECK(spec.beta1 >= 0.f && spec.beta1 < 1.f, "[optim] ", spec.type,
             " beta1 must be in [0, 1), got ", spec.beta1);
    ZT_CHECK(spec.beta2 >= 0.f && spec.beta2 < 1.f, "[optim] ", spec.type,
             " beta2 must be in [0, 1), got ", spec.beta2);
    ZT_CHECK(std::isfinite(spec.eps) && spec.eps >= 0.f, "[optim] ", spec.type,
             " eps must be >= 0, got ", spec.eps);
    return std::make_unique<AdamOptimizer>(spec, n, t == "adamw");
  }
  if (t == "sgd") {
    ZT_CHECK(std::isfinite(spec.momentum) && spec.momentum >= 0.f,
             "[optim] SGD momentum must be >= 0, got ", spec.momentum);
    ZT_CHECK(!spec.nesterov || spec.momentum > 0.f,
             "[optim] SGD nesterov requires momentum > 0 (dampening is always 0)");
    return std::make_unique<SgdOptimizer>(spec, n);
  }
  ZT_THROW("[optim] unknown optimizer type '", spec.type, "' (allowed: Adam, AdamW, SGD)");
}

int64_t state_bytes_per_elem(const OptimizerSpec& spec) {
  std::string t;
  for (char c : spec.type) t += char(std::tolower(static_cast<unsigned char>(c)));
  if (t == "sgd") return spec.momentum != 0.f ? 4 : 0;
  return 8;  // exp_avg + exp_avg_sq
}

}  // namespace zt::optim
