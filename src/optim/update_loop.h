#pragma once
// Internal: the one element loop every optimizer rule runs in, templated per dtype combination
// so each instantiation is branch-free and vectorises (Note [update loop]).
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "zt/core/dtype.h"
#include "zt/core/parallel.h"
#include "zt/ops/update.h"
#include "zt/optim/optimizer.h"

namespace zt::optim::detail {

// Note [update loop]: one pass reads the weight (master if any, else param), the gradient in
// its dtype, scales it by one float multiply (torch's grad.mul_(scale)), applies the rule and
// writes the master and the rounded param. Rules keep PyTorch 1.13's float operation order;
// the files that define them build with -ffp-contract=off and spell every fused multiply-add
// as std::fma, so the rounding does not depend on the compiler's contraction choices (the
// fmas sit where gcc contracted the previous FlatOptimizer, keeping its results bit-identical).

// Every helper the loop calls must inline, or the loop does not vectorise (gcc stops inlining
// once the 156 instantiations grow the unit): ZT_ALWAYS_INLINE, and core's conversions are
// branch-free and always inlined (Note [branch-free f16] in zt/core/dtype.h).

ZT_ALWAYS_INLINE float to_float(float v) { return v; }
ZT_ALWAYS_INLINE float to_float(bf16 v) { return bf16_to_float(v); }
ZT_ALWAYS_INLINE float to_float(f16 v) { return f16_to_float(v); }

template <typename T>
ZT_ALWAYS_INLINE T from_float(float v) {
  if constexpr (std::is_same_v<T, float>)
    return v;
  else if constexpr (std::is_same_v<T, bf16>)
    return float_to_bf16(v);
  else
    return float_to_f16(v);
}

// s0/s1: the rule's state arrays (nullptr where it has fewer); rule(w, g, s0, s1, i) returns
// the new weight and updates its states at i.
template <typename P, typename G, bool kMaster, typename Rule>
void update_range(P* __restrict param, float* __restrict master, const G* __restrict grad, float* __restrict s0,
                  float* __restrict s1, int64_t n, float scale, const Rule rule) {
  static_assert(kMaster || std::is_same_v<P, float>, "low-precision params need a master");
  for (int64_t i = 0; i < n; ++i) {
    const float w = kMaster ? master[i] : to_float(param[i]);
    const float g = to_float(grad[i]) * scale;
    const float out = rule(w, g, s0, s1, i);
    if constexpr (kMaster) master[i] = out;
    param[i] = from_float<P>(out);
  }
}

template <typename T>
T* ptr(const Tensor& t) {
  return t.defined() ? static_cast<T*>(t.raw_data()) : nullptr;
}

template <typename F>
void with_dtype(DType d, F&& f) {
  switch (d) {
    case DType::f32:
      f(float{});
      break;
    case DType::bf16:
      f(bf16{});
      break;
    default:
      f(f16{});
      break;  // update() admits only f32, bf16, f16
  }
}

// Runs the rule over a's range in kOptimGrain chunks, instantiated for a's dtype combination.
template <typename Rule>
void run(const UpdateArgs& a, const Rule& rule) {
  const int64_t n = a.param.numel();
  float* s0 = a.states.size() > 0 ? ptr<float>(a.states[0]) : nullptr;
  float* s1 = a.states.size() > 1 ? ptr<float>(a.states[1]) : nullptr;
  float* m = ptr<float>(a.master);
  const float scale = a.grad_scale;
  with_dtype(a.grad.dtype(), [&](auto g_tag) {
    using G = decltype(g_tag);
    const G* g = ptr<G>(a.grad);
    if (!m) {
      float* p = ptr<float>(a.param);
      parallel_for(n, kOptimGrain, [&](int64_t b, int64_t e) {
        update_range<float, G, false>(p + b, nullptr, g + b, s0 ? s0 + b : nullptr, s1 ? s1 + b : nullptr, e - b, scale,
                                      rule);
      });
      return;
    }
    with_dtype(a.param.dtype(), [&](auto p_tag) {
      using P = decltype(p_tag);
      P* p = ptr<P>(a.param);
      parallel_for(n, kOptimGrain, [&](int64_t b, int64_t e) {
        update_range<P, G, true>(p + b, m + b, g + b, s0 ? s0 + b : nullptr, s1 ? s1 + b : nullptr, e - b, scale, rule);
      });
    });
  });
}

// Note [float hyper-parameters]: the config holds doubles; the rules take their float roundings,
// as torch's fp32 kernels do, and the checks in optimizer.cpp judge those (a beta2 that rounds
// to 1 is out of range). Rounded once, in floats_of(), and nowhere else.
struct FloatHyper {
  float lr, beta1, beta2, eps, weight_decay, momentum;
  bool nesterov;
};

// Note [device updates]: a GPU's tensors go to its kernel table with the same per-step scalars.
inline ops::DeviceUpdate device_update(const UpdateArgs& a) {
  return {a.param,
          a.master,
          a.grad,
          a.states.size() > 0 ? a.states[0] : Tensor(),
          a.states.size() > 1 ? a.states[1] : Tensor(),
          a.grad_scale};
}

void update_adam(const FloatHyper& h, bool decoupled, const UpdateArgs& a);
void update_sgd(const FloatHyper& h, const UpdateArgs& a);

}  // namespace zt::optim::detail
