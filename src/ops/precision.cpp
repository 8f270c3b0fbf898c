// Contracts of the whole-buffer precision ops (casts, in-place scaling and accumulation,
// squared norms, overflow checks): validate, allocate, dispatch to the backend's kernel.
#include "contract.h"
#include "cpu/kernels.h"
#include "zt/ops/ops.h"

namespace zt::ops {

using detail::check_contiguous;
using detail::check_float;

namespace {
void check_float_dtype(DType dt, const char* op) {
  ZT_CHECK(detail::is_float(dt), "[", op, "] dtype ", dtype_name(dt), " is not supported (allowed: f32, bf16, f16)");
}
}  // namespace

Tensor cast(const Tensor& x, DType dt) {
  check_float(x, "cast");
  check_float_dtype(dt, "cast");
  Tensor src = x.contiguous();
  Tensor out = Tensor::empty(x.shape(), dt, x.device());
  if (out.numel() == 0) return out;
  ZT_RUN(cast, __func__, src.device(), src, out);
  return out;
}

void cast_into(Tensor& dst, const Tensor& src) {
  check_float(dst, "cast_into");
  check_float(src, "cast_into");
  check_contiguous(dst, "cast_into", "destination");
  ZT_CHECK(dst.numel() == src.numel(), "[cast_into] destination ", shape_str(dst.shape()), " has ", dst.numel(),
           " elements but source ", shape_str(src.shape()), " has ", src.numel());
  if (dst.numel() == 0) return;
  Tensor s = src.contiguous();
  ZT_RUN(cast, __func__, dst.device(), s, dst);
}

void scale_(Tensor& x, float s) {
  check_float(x, "scale_");
  check_contiguous(x, "scale_", "tensor");
  if (x.numel() == 0) return;
  ZT_RUN(scale_, __func__, x.device(), x, s);
}

void axpy_(Tensor& dst, float alpha, const Tensor& src) {
  check_float(dst, "axpy_");
  check_float(src, "axpy_");
  detail::check_same_shape(dst, src, "axpy_", "destination", "source");
  check_contiguous(dst, "axpy_", "destination");
  if (dst.numel() == 0) return;
  Tensor s = src.contiguous();
  ZT_RUN(axpy_, __func__, dst.device(), dst, alpha, s);
}

void add_(Tensor& dst, const Tensor& src) {
  check_float(dst, "add_");
  check_float(src, "add_");
  detail::check_same_shape(dst, src, "add_", "destination", "source");
  check_contiguous(dst, "add_", "destination");
  if (dst.numel() == 0) return;
  Tensor s = src.contiguous();
  ZT_RUN(axpy_, __func__, dst.device(), dst, 1.f, s);  // x + 1*y rounds exactly as x + y
}

void sum_of_squares_to(const Tensor& x, Tensor& out, int64_t slot) {
  check_float(x, "sum_of_squares_to");
  ZT_CHECK(out.dtype() == DType::i64 && out.is_contiguous() && slot >= 0 && slot < out.numel(),
           "[sum_of_squares_to] takes a contiguous i64 output and a slot inside it, got ", dtype_name(out.dtype()),
           " of ", out.numel(), " and slot ", slot);
  const Tensor c = x.contiguous();
  ZT_RUN(sum_of_squares_to, __func__, c.device(), c, out, slot);
}

double sum_of_squares(const Tensor& x) {
  check_float(x, "sum_of_squares");
  Tensor c = x.contiguous();
  return ZT_RUN(sum_of_squares, __func__, c.device(), c);
}

bool has_nonfinite(const Tensor& x) {
  check_float(x, "has_nonfinite");
  if (x.numel() == 0) return false;
  Tensor c = x.contiguous();
  return ZT_RUN(has_nonfinite, __func__, c.device(), c);
}

}  // namespace zt::ops
