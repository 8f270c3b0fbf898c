#include "zt/optim/optimizer.h"

#include <cctype>
#include <cmath>

#include "hyper.h"
#include "zt/core/error.h"

namespace zt::optim {
namespace {

enum class Kind { adam, adamw, sgd };

// Note [float hyper-parameters]: the one place the config's doubles become floats.
detail::FloatHyper floats_of(const config::OptimizerConfig& c) {
  return {float(c.lr),           float(c.beta1),    float(c.beta2), float(c.eps),
          float(c.weight_decay), float(c.momentum), c.nesterov};
}

// Validates the spec (its float hyper-parameters, `s`) and names its rule: the one place that
// reads spec.type.
Kind kind_of(const config::OptimizerConfig& spec, const detail::FloatHyper& s) {
  std::string t;
  for (char c : spec.type) t += char(std::tolower(static_cast<unsigned char>(c)));
  constexpr auto cfg = ErrorKind::config;
  ZT_CHECK_AS(cfg, t == "adam" || t == "adamw" || t == "sgd", "[optim] unknown optimizer type '", spec.type,
              "' (allowed: Adam, AdamW, SGD)");
  ZT_CHECK_AS(cfg, std::isfinite(s.lr) && s.lr >= 0.f, "[optim] lr must be >= 0, got ", s.lr);
  ZT_CHECK_AS(cfg, std::isfinite(s.weight_decay) && s.weight_decay >= 0.f, "[optim] weight_decay must be >= 0, got ",
              s.weight_decay);
  if (t == "sgd") {
    ZT_CHECK_AS(cfg, std::isfinite(s.momentum) && s.momentum >= 0.f, "[optim] SGD momentum must be >= 0, got ",
                s.momentum);
    ZT_CHECK_AS(cfg, !s.nesterov || s.momentum > 0.f,
                "[optim] SGD nesterov requires momentum > 0 (dampening is always 0)");
    return Kind::sgd;
  }
  ZT_CHECK_AS(cfg, s.beta1 >= 0.f && s.beta1 < 1.f, "[optim] ", spec.type, " beta1 must be in [0, 1), got ", s.beta1);
  ZT_CHECK_AS(cfg, s.beta2 >= 0.f && s.beta2 < 1.f, "[optim] ", spec.type, " beta2 must be in [0, 1), got ", s.beta2);
  ZT_CHECK_AS(cfg, std::isfinite(s.eps) && s.eps >= 0.f, "[optim] ", spec.type, " eps must be >= 0, got ", s.eps);
  return t == "adam" ? Kind::adam : Kind::adamw;
}

bool is_update_dtype(DType d) { return d == DType::f32 || d == DType::bf16 || d == DType::f16; }

void check_tensor(const Tensor& t, const char* what, int64_t n) {
  ZT_CHECK(t.defined(), "[optim.update] ", what, " is undefined");
  ZT_CHECK(t.is_contiguous(), "[optim.update] ", what, " must be contiguous");
  ZT_CHECK(t.numel() == n, "[optim.update] ", what, " has ", t.numel(), " elements, param has ", n);
  ZT_CHECK(n == 0 || t.has_storage(), "[optim.update] ", what, " has no storage");
}

}  // namespace

void validate(const config::OptimizerConfig& spec) { kind_of(spec, floats_of(spec)); }

std::vector<std::string> state_names(const config::OptimizerConfig& spec) {
  const detail::FloatHyper h = floats_of(spec);
  if (kind_of(spec, h) != Kind::sgd) return {"exp_avg", "exp_avg_sq"};
  if (h.momentum != 0.f) return {"momentum_buffer"};
  return {};
}

int64_t state_bytes_per_elem(const config::OptimizerConfig& spec) { return 4 * int64_t(state_names(spec).size()); }

void update(const config::OptimizerConfig& spec, const UpdateArgs& a) {
  const detail::FloatHyper h = floats_of(spec);
  const Kind kind = kind_of(spec, h);
  ZT_CHECK(a.param.defined(), "[optim.update] param is undefined");
  const int64_t n = a.param.numel();
  check_tensor(a.param, "param", n);
  check_tensor(a.grad, "grad", n);
  ZT_CHECK(is_update_dtype(a.param.dtype()) && is_update_dtype(a.grad.dtype()),
           "[optim.update] param and grad must be f32, bf16 or f16, got ", dtype_name(a.param.dtype()), " and ",
           dtype_name(a.grad.dtype()));
  if (a.master.defined()) {
    check_tensor(a.master, "master", n);
    ZT_CHECK(a.master.dtype() == DType::f32, "[optim.update] master must be f32, got ", dtype_name(a.master.dtype()));
  } else {
    ZT_CHECK(a.param.dtype() == DType::f32, "[optim.update] ", dtype_name(a.param.dtype()),
             " params need an fp32 master");
  }
  if (a.widened.defined()) {
    ZT_CHECK(a.master.defined(), "[optim.update] a widened copy needs a master (f32 params are their own)");
    check_tensor(a.widened, "widened", n);
    ZT_CHECK(a.widened.dtype() == DType::f32, "[optim.update] widened must be f32, got ",
             dtype_name(a.widened.dtype()));
  }
  const size_t want = kind == Kind::sgd ? (h.momentum != 0.f ? 1 : 0) : 2;
  ZT_CHECK(a.states.size() == want, "[optim.update] ", spec.type, " takes ", want, " state tensors, got ",
           a.states.size());
  for (const Tensor& s : a.states) {
    check_tensor(s, "state", n);
    ZT_CHECK(s.dtype() == DType::f32, "[optim.update] states must be f32, got ", dtype_name(s.dtype()));
  }
  ZT_CHECK(a.step >= 1, "[optim.update] step is 1-based, got ", a.step);
  ZT_CHECK(std::isfinite(a.lr) && a.lr >= 0.f, "[optim.update] lr must be >= 0, got ", a.lr);
  if (n == 0) return;
  if (kind == Kind::sgd)
    detail::update_sgd(h, a);
  else
    detail::update_adam(h, kind == Kind::adamw, a);
}

}  // namespace zt::optim
