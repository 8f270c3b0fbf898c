#pragma once
// The CPU backend: one kernel per op. Callers (the contracts in src/ops/*.cpp) have validated
// the arguments, made inputs contiguous and allocated outputs; kernels only compute.
#include <cstdint>

#include "zt/core/tensor.h"

namespace zt::ops::cpu {

// ---- precision (precision.cpp) ----
void cast(const Tensor& src, Tensor& dst);  // same numel, any float dtypes
void scale_(Tensor& x, float s);
void axpy_(Tensor& dst, float alpha, const Tensor& src);  // same numel, any float dtypes
double sum_of_squares(const Tensor& x);
bool has_nonfinite(const Tensor& x);

}  // namespace zt::ops::cpu
