// The CPU's optimizer updates (Note [device updates] in zt/ops/update.h): PyTorch 1.13's
// single-tensor Adam, AdamW and SGD over one flat range, in one vectorised pass. Built with
// -ffp-contract=off and -fno-math-errno (Note [update loop]).
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "convert.h"
#include "kernels.h"
#include "zt/core/dtype.h"
#include "zt/core/parallel.h"
#include "zt/ops/update.h"

namespace zt::ops::cpu {
namespace {

// Note [update loop]: one pass reads the weight (master if any, else param), the gradient in
// its dtype, scales it by one float multiply (torch's grad.mul_(scale)), applies the rule and
// writes the master and the rounded param. Rules keep PyTorch 1.13's float operation order; this
// file builds with -ffp-contract=off and spells every fused multiply-add as std::fma, so the
// rounding does not depend on the compiler's contraction choices. Every helper the loop calls
// must inline, or the loop does not vectorise: ZT_ALWAYS_INLINE, and core's conversions are
// branch-free and always inlined (Note [branch-free f16] in zt/core/dtype.h).
constexpr int64_t kUpdateGrain = int64_t(1) << 14;  // optim::kOptimGrain: chunks of one thread

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
ZT_ALWAYS_INLINE void update_span(P* __restrict param, float* __restrict master, const G* __restrict grad,
                                  float* __restrict s0, float* __restrict s1, int64_t n, float scale,
                                  const Rule& rule) {
  for (int64_t i = 0; i < n; ++i) {
    const float w = kMaster ? master[i] : to_float(param[i]);
    const float g = to_float(grad[i]) * scale;
    const float out = rule(w, g, s0, s1, i);
    if constexpr (kMaster) master[i] = out;
    param[i] = from_float<P>(out);
  }
}

// Note [streamed params]: beside a master the 16-bit param is written and never read: spans of
// kBlock go out through an L1 buffer (Note [streamed stores] in convert.h), AdamW bf16 10% faster.
// Note [widened by the update]: where the model computes in f32 over 16-bit params (Note [f32
// compute] in zero/param_store.cpp) `wide` gets float(param) from the same L1 buffer, so the
// step's separate widening pass (read 2 bytes, write 4 a parameter) is not made for this range.
template <typename P>
ZT_ALWAYS_INLINE void widen_span(float* __restrict wide, const P* __restrict param, int64_t n) {
  for (int64_t i = 0; i < n; ++i) wide[i] = to_float(param[i]);
}

template <typename P, typename G, bool kMaster, typename Rule>
void update_range(P* __restrict param, float* __restrict master, const G* __restrict grad, float* __restrict s0,
                  float* __restrict s1, float* __restrict wide, int64_t n, float scale, const Rule rule) {
  static_assert(kMaster || std::is_same_v<P, float>, "low-precision params need a master");
  if constexpr (!kMaster || std::is_same_v<P, float> || !kStreams) {
    update_span<P, G, kMaster>(param, master, grad, s0, s1, n, scale, rule);
    if (wide) widen_span(wide, param, n);  // this chunk's params are still in cache
  } else {
    // The unaligned head as it is, then aligned spans through the buffer (Note [streamed params]).
    const int64_t misaligned = int64_t(reinterpret_cast<uintptr_t>(param) % 64);
    const int64_t head = std::min<int64_t>(n, (64 - misaligned) % 64 / int64_t(sizeof(P)));
    update_span<P, G, true>(param, master, grad, s0, s1, head, scale, rule);
    if (wide) widen_span(wide, param, head);
    alignas(64) P buf[kBlock];
    alignas(64) float wbuf[kBlock];
    for (int64_t b = head; b < n; b += kBlock) {
      const int64_t len = std::min(kBlock, n - b);
      update_span<P, G, true>(buf, master + b, grad + b, s0 ? s0 + b : nullptr, s1 ? s1 + b : nullptr, len, scale,
                              rule);
      stream_block(param + b, buf, len);
      if (wide) {
        widen_span(wbuf, buf, len);
        stream_block(wide + b, wbuf, len);
      }
    }
    _mm_sfence();  // streaming stores are weakly ordered: done before the caller's barrier
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
      break;  // optim admits only f32, bf16, f16
  }
}

// Runs the rule over u's range in kUpdateGrain chunks, instantiated for u's dtype combination.
template <typename Rule>
void run(const DeviceUpdate& u, const Rule& rule) {
  const int64_t n = u.param.numel();
  float* s0 = ptr<float>(u.s0);
  float* s1 = ptr<float>(u.s1);
  float* m = ptr<float>(u.master);
  float* w = ptr<float>(u.widened);
  const float scale = u.grad_scale;
  with_dtype(u.grad.dtype(), [&](auto g_tag) {
    using G = decltype(g_tag);
    const G* g = ptr<G>(u.grad);
    if (!m) {
      float* p = ptr<float>(u.param);
      parallel_for(n, kUpdateGrain, [&](int64_t b, int64_t e) {
        update_range<float, G, false>(p + b, nullptr, g + b, s0 ? s0 + b : nullptr, s1 ? s1 + b : nullptr, nullptr,
                                      e - b, scale, rule);
      });
      return;
    }
    with_dtype(u.param.dtype(), [&](auto p_tag) {
      using P = decltype(p_tag);
      P* p = ptr<P>(u.param);
      parallel_for(n, kUpdateGrain, [&](int64_t b, int64_t e) {
        update_range<P, G, true>(p + b, m + b, g + b, s0 ? s0 + b : nullptr, s1 ? s1 + b : nullptr, w ? w + b : nullptr,
                                 e - b, scale, rule);
      });
    });
  });
}

// torch 1.13 _single_tensor_adam(w):
//   m = m*b1 + (1-b1)*g;  v = v*b2 + ((1-b2)*g)*g;  denom = sqrt(v)/bc2_sqrt + eps;
//   p = p + (-step_size*m)/denom
template <bool kL2, bool kDecoupled>
struct AdamRule {
  AdamStep s;
  ZT_ALWAYS_INLINE float operator()(float w, float g, float* __restrict m, float* __restrict v, int64_t i) const {
    if constexpr (kL2) g = std::fma(s.l2, w, g);
    const float mi = std::fma(m[i], s.beta1, s.one_minus_beta1 * g);
    const float vi = std::fma(v[i], s.beta2, s.one_minus_beta2 * g * g);
    const float denom = std::sqrt(vi) / s.bias_correction2_sqrt + s.eps;
    m[i] = mi;
    v[i] = vi;
    const float delta = s.neg_step_size * mi / denom;
    if constexpr (kDecoupled)
      return std::fma(w, s.decay, delta);
    else
      return w + delta;
  }
};

// torch 1.13 _single_tensor_sgd with dampening 0:
//   d = g + wd*p;  buf = first ? d : buf*mom + d;  d = nesterov ? d + mom*buf : buf;
//   p = p + (-lr)*d
template <bool kWd, bool kMomentum, bool kFirst, bool kNesterov>
struct SgdRule {
  float wd, mom, neg_lr;
  ZT_ALWAYS_INLINE float operator()(float w, float g, float* __restrict buf, float*, int64_t i) const {
    float d = g;
    if constexpr (kWd) d = std::fma(wd, w, d);
    if constexpr (kMomentum) {
      const float b = kFirst ? d : std::fma(buf[i], mom, d);
      buf[i] = b;
      d = kNesterov ? std::fma(mom, b, d) : b;
    }
    return std::fma(neg_lr, d, w);
  }
};

// One instantiation per flag combination keeps each inner loop branch-free.
template <bool kWd>
void run_sgd(const SgdStep& s, const DeviceUpdate& u) {
  if (!s.momentum)
    run(u, SgdRule<kWd, false, false, false>{s.wd, s.mom, s.neg_lr});
  else if (s.first && s.nesterov)
    run(u, SgdRule<kWd, true, true, true>{s.wd, s.mom, s.neg_lr});
  else if (s.first)
    run(u, SgdRule<kWd, true, true, false>{s.wd, s.mom, s.neg_lr});
  else if (s.nesterov)
    run(u, SgdRule<kWd, true, false, true>{s.wd, s.mom, s.neg_lr});
  else
    run(u, SgdRule<kWd, true, false, false>{s.wd, s.mom, s.neg_lr});
}

}  // namespace

void adam_update(const AdamStep& s, const DeviceUpdate& u) {
  if (s.decoupled)
    run(u, AdamRule<false, true>{s});
  else if (s.l2_on)
    run(u, AdamRule<true, false>{s});
  else
    run(u, AdamRule<false, false>{s});
}

void sgd_update(const SgdStep& s, const DeviceUpdate& u) {
  if (s.weight_decay)
    run_sgd<true>(s, u);
  else
    run_sgd<false>(s, u);
}

}  // namespace zt::ops::cpu
