#pragma once
// The product path of a 16-bit run (Note [16-bit products]), chosen once before step 1.
#include <cstdint>
#include <optional>
#include <string>

#include "zt/comm/group.h"
#include "zt/core/dtype.h"
#include "zt/ops/ops.h"

namespace zt::zero {

// A Linear's products as the run computes them: x [rows, in] @ w [out, in]^T and its backward.
struct ProductShape {
  int64_t rows = 256, in = 768, out = 3072;
};

struct ProductsChoice {
  ops::Products products = ops::Products::native;
  std::string setting;  // "auto" | "native" | "f32"
  std::string reason;   // e.g. "measured 1.8 ms vs native 2.4 ms on 256x768x3072; no AMX"
  bool amx = false;
  double native_ms = 0, f32_ms = 0;  // rank 0's measurement; 0 where none was taken
  ProductShape shape;
  // "bf16 products: f32 kernels (measured ...)", for the start line; with f32 compute, says so
  std::string line(DType dt, bool f32_compute = false) const;
  // Note [f32 compute]: on the f32 path the model computes in f32 over weights widened once per
  // gather, where the products are the CPU's (a CUDA device has its own 16-bit kernels).
  bool f32_compute(Device d) const { return products == ops::Products::f32 && d.type != DeviceType::cuda; }
};

// auto's inputs: what the processor offers and, where both paths were timed, their times.
struct ProductFacts {
  bool amx = false;
  bool kernel = true;  // oneDNN has a 16-bit kernel for the dtype
  std::optional<ops::ProductTimes> times;
};
// auto's rule, without side effects: no kernel -> f32; AMX (or nothing timed) -> native; else f32
// only where its time is under kF32Margin of native's: the f32 path computes in f32 (Note [f32
// compute]), which costs 4 bytes a gathered weight and twice the activations, so a tie keeps native.
constexpr double kF32Margin = 0.9;
ProductsChoice decide_products(DType dt, const ProductFacts& facts, ProductShape shape);

// setting "native" or "f32" is taken as it is. "auto": decide_products on rank 0's facts, timing
// both paths on `shape` (a few tenths of a second at most) where it has a kernel and no AMX. Rank 0 decides and every
// rank takes its choice (a collective in group, so every rank calls this, with the same setting). Sets
// ops::set_lowp_products on every rank.
ProductsChoice choose_products(comm::Group& group, DType dt, const std::string& setting, ProductShape shape);

}  // namespace zt::zero
