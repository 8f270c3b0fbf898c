// CUDA optimizer updates (Note [device updates]): optim's Adam/AdamW and SGD rules elementwise,
// in the same float operation order, with fmaf exactly where update_adam/update_sgd.cpp fuse.
#include "common.cuh"

namespace zt::ops::cuda {

namespace {

// Products, sums, quotients and roots are spelled as _rn intrinsics, which the compiler never
// contracts into fused multiply-adds, so the rounding is optim's whatever the flags.
__device__ __forceinline__ float mul(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ float add(float a, float b) { return __fadd_rn(a, b); }

// The weight the rule reads: the master copy if any, else the f32 param.
template <typename P, bool kMaster>
__device__ __forceinline__ float weight(const P* param, const float* master, int64_t i) {
  if constexpr (kMaster)
    return master[i];
  else
    return to_f(param[i]);
}

// Writes the new weight to the master (if any), the rounded param and its f32 value where asked
// (Note [widened by the update] in ops/cpu/update.cpp).
template <typename P, bool kMaster>
__device__ __forceinline__ void store(P* param, float* master, float* wide, int64_t i, float w) {
  if constexpr (kMaster) master[i] = w;
  const P p = from_f<P>(w);
  param[i] = p;
  if (wide) wide[i] = to_f(p);
}

// torch 1.13 _single_tensor_adam(w): m = m*b1 + (1-b1)*g; v = v*b2 + ((1-b2)*g)*g;
// denom = sqrt(v)/bc2_sqrt + eps; p = p + (-step_size*m)/denom (AdamW: p = p*decay + that).
template <typename P, typename G, bool kMaster>
__global__ void adam_kernel(AdamStep s, P* param, float* master, float* wide, const G* grad, float* m, float* v,
                            int64_t n, float scale) {
  for (int64_t i = global_index(); i < n; i += grid_stride()) {
    const float w = weight<P, kMaster>(param, master, i);
    float g = mul(to_f(grad[i]), scale);
    if (s.l2_on) g = fmaf(s.l2, w, g);
    const float mi = fmaf(m[i], s.beta1, mul(s.one_minus_beta1, g));
    const float vi = fmaf(v[i], s.beta2, mul(mul(s.one_minus_beta2, g), g));
    const float denom = add(__fdiv_rn(__fsqrt_rn(vi), s.bias_correction2_sqrt), s.eps);
    m[i] = mi;
    v[i] = vi;
    const float delta = __fdiv_rn(mul(s.neg_step_size, mi), denom);
    store<P, kMaster>(param, master, wide, i, s.decoupled ? fmaf(w, s.decay, delta) : add(w, delta));
  }
}

// torch 1.13 _single_tensor_sgd, dampening 0: d = g + wd*p; buf = first ? d : buf*mom + d;
// d = nesterov ? d + mom*buf : buf; p = p + (-lr)*d.
template <typename P, typename G, bool kMaster>
__global__ void sgd_kernel(SgdStep s, P* param, float* master, float* wide, const G* grad, float* buf, int64_t n,
                           float scale) {
  for (int64_t i = global_index(); i < n; i += grid_stride()) {
    const float w = weight<P, kMaster>(param, master, i);
    float d = mul(to_f(grad[i]), scale);
    if (s.weight_decay) d = fmaf(s.wd, w, d);
    if (s.momentum) {
      const float b = s.first ? d : fmaf(buf[i], s.mom, d);
      buf[i] = b;
      d = s.nesterov ? fmaf(s.mom, b, d) : b;
    }
    store<P, kMaster>(param, master, wide, i, fmaf(s.neg_lr, d, w));
  }
}

float* f32_or_null(const Tensor& t) { return t.defined() ? ptr<float>(t) : nullptr; }

// Calls launch(Type<P>, Type<G>, has_master) for u's dtypes: P = float without a master.
template <typename Launch>
void dispatch_update(const DeviceUpdate& u, const char* op, Launch&& launch) {
  dispatch_float(u.grad.dtype(), op, [&](auto g_tag) {
    if (!u.master.defined()) {
      ZT_CHECK(u.param.dtype() == DType::f32, "[", op, "] a ", dtype_name(u.param.dtype()),
               " parameter needs an f32 master");
      launch(Type<float>{}, g_tag, std::false_type{});
      return;
    }
    dispatch_float(u.param.dtype(), op, [&](auto p_tag) { launch(p_tag, g_tag, std::true_type{}); });
  });
}

}  // namespace

void adam_update(const AdamStep& s, const DeviceUpdate& u) {
  const int64_t n = u.param.numel();
  if (n == 0) return;
  Ctx ctx(u.param);
  dispatch_update(u, "adam_update", [&](auto p_tag, auto g_tag, auto has_master) {
    using P = typename decltype(p_tag)::type;
    using G = typename decltype(g_tag)::type;
    adam_kernel<P, G, decltype(has_master)::value><<<blocks_for(n), kThreads, 0, ctx.stream>>>(
        s, ptr<P>(u.param), f32_or_null(u.master), f32_or_null(u.widened), ptr<const G>(u.grad), f32_or_null(u.s0),
        f32_or_null(u.s1), n, u.grad_scale);
  });
  check_launch("adam_update");
}

void sgd_update(const SgdStep& s, const DeviceUpdate& u) {
  const int64_t n = u.param.numel();
  if (n == 0) return;
  ZT_CHECK(!s.momentum || u.s0.defined(), "[sgd_update] momentum needs a momentum buffer");
  Ctx ctx(u.param);
  dispatch_update(u, "sgd_update", [&](auto p_tag, auto g_tag, auto has_master) {
    using P = typename decltype(p_tag)::type;
    using G = typename decltype(g_tag)::type;
    sgd_kernel<P, G, decltype(has_master)::value><<<blocks_for(n), kThreads, 0, ctx.stream>>>(
        s, ptr<P>(u.param), f32_or_null(u.master), f32_or_null(u.widened), ptr<const G>(u.grad), f32_or_null(u.s0), n,
        u.grad_scale);
  });
  check_launch("sgd_update");
}

}  // namespace zt::ops::cuda
