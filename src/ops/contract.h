#pragma once
// Private to zt_ops: the argument checks every op contract shares. A contract (src/ops/*.cpp)
// validates, infers the output shape and dtype, allocates on the inputs' device, then calls that
// device's kernel (Note [kernel table]).
#include "kernel_table.h"
#include "zt/core/tensor.h"

namespace zt::ops::detail {

inline bool is_float(DType dt) { return dt == DType::f32 || dt == DType::bf16 || dt == DType::f16; }

inline void check_float(const Tensor& x, const char* op) {
  ZT_CHECK(x.defined(), "[", op, "] undefined tensor");
  ZT_CHECK(is_float(x.dtype()), "[", op, "] dtype ", dtype_name(x.dtype()),
           " is not supported (allowed: f32, bf16, f16)");
}

inline void check_same_dtype(const Tensor& a, const Tensor& b, const char* op) {
  ZT_CHECK(a.dtype() == b.dtype(), "[", op, "] dtypes differ: ", dtype_name(a.dtype()), " and ", dtype_name(b.dtype()));
}

inline void check_same_shape(const Tensor& a, const Tensor& b, const char* op, const char* na, const char* nb) {
  ZT_CHECK(a.shape() == b.shape(), "[", op, "] ", na, " ", shape_str(a.shape()), " and ", nb, " ", shape_str(b.shape()),
           " differ");
}

inline void check_contiguous(const Tensor& x, const char* op, const char* what) {
  ZT_CHECK(x.is_contiguous(), "[", op, "] ", what, " of shape ", shape_str(x.shape()), " must be contiguous");
}

// A fused norm's residual (x's shape and dtype), contiguous; undefined where there is none.
inline Tensor checked_residual(const Tensor* residual, const Tensor& x, const char* op) {
  if (!residual) return Tensor();
  ZT_CHECK(residual->defined(), "[", op, "] the residual is an undefined tensor");
  ZT_CHECK(residual->dtype() == x.dtype(), "[", op, "] the residual's dtype ", dtype_name(residual->dtype()),
           " differs from x's ", dtype_name(x.dtype()));
  check_same_shape(*residual, x, op, "residual", "x");
  return residual->contiguous();
}

// Where a norm's backward writes dx (Note [fused residual norms]): contiguous, x's shape and
// dtype, and none of the inputs' memory (the kernels read dy and x after writing dx).
inline void check_dx_into(const Tensor& dx, const Tensor& x, const Tensor& dy, const char* op) {
  ZT_CHECK(dx.defined(), "[", op, "] dx_into is an undefined tensor");
  ZT_CHECK(dx.dtype() == x.dtype(), "[", op, "] dx_into's dtype ", dtype_name(dx.dtype()), " differs from x's ",
           dtype_name(x.dtype()));
  check_same_shape(dx, x, op, "dx_into", "x");
  check_contiguous(dx, op, "dx_into");
  for (const Tensor* in : {&x, &dy})
    ZT_CHECK(!dx.has_storage() || dx.storage() != in->storage(), "[", op, "] dx_into shares memory with ",
             in == &x ? "x" : "dy", ": the backward reads them after writing dx");
}

}  // namespace zt::ops::detail
