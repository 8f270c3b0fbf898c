#pragma once
// Helpers shared by the CPU kernels (private to zt_ops): dtype dispatch, scalar f32/bf16/f16
// loads and stores (the block conversions in convert.h are the fast path), a vectorisable exp.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "../approx.h"
#include "../contract.h"
#include "convert.h"
#include "zt/core/parallel.h"
#include "zt/core/tensor.h"
#include "zt/ops/ops.h"

namespace zt::ops::detail {

inline float ld(const float* p, int64_t i) { return p[i]; }
inline float ld(const bf16* p, int64_t i) { return bf16_to_float(p[i]); }
inline void st(float* p, int64_t i, float v) { p[i] = v; }
inline void st(bf16* p, int64_t i, float v) { p[i] = float_to_bf16(v); }
inline float ld(const f16* p, int64_t i) { return f16_to_float(p[i]); }
inline void st(f16* p, int64_t i, float v) { p[i] = float_to_f16(v); }

// Calls fn(T{}) with T = float, bf16 or f16 for the dtype.
template <typename Fn>
decltype(auto) dispatch_float(DType dt, const char* op, Fn&& fn) {
  switch (dt) {
    case DType::f32:
      return fn(float{});
    case DType::bf16:
      return fn(bf16{});
    case DType::f16:
      return fn(f16{});
    default:
      break;
  }
  ZT_THROW("[", op, "] dtype ", dtype_name(dt), " is not supported (allowed: f32, bf16, f16)");
}

using approx::exp_approx;
using approx::tanh_approx;
using approx::gelu_erf;
using approx::gelu_erf_grad;
using approx::gelu_tanh;
using approx::gelu_tanh_grad;

}  // namespace zt::ops::detail

namespace zt::ops::cpu {

// A small tensor's values as f32 on the host (a norm's gains), for kernels that read them per row.
inline std::vector<float> f32_values(const Tensor& t, const char* op) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  detail::dispatch_float(t.dtype(), op, [&](auto tag) { to_f32(t.data<decltype(tag)>(), v.data(), t.numel()); });
  return v;
}

}  // namespace zt::ops::cpu
