// Contracts of the reductions (sum/mean over everything or one dimension) with their backward,
// and the argmax metrics.
#include "contract.h"
#include "cpu/kernels.h"
#include "zt/ops/ops.h"

namespace zt::ops {

using detail::check_float;

namespace {

int64_t norm_dim(int64_t d, int64_t nd, const char* op) {
  if (d < 0) d += nd;
  ZT_CHECK(d >= 0 && d < nd, "[", op, "] dimension ", d, " out of range for a ", nd, "-d tensor");
  return d;
}

// A shape viewed as [outer, r, inner] around dimension d.
struct Split {
  int64_t outer = 1, r = 1, inner = 1;
};
Split split(const Shape& s, int64_t d) {
  Split p;
  for (int64_t i = 0; i < int64_t(s.size()); ++i) {
    if (i < d)
      p.outer *= s[size_t(i)];
    else if (i == d)
      p.r = s[size_t(i)];
    else
      p.inner *= s[size_t(i)];
  }
  return p;
}

Shape reduced_shape(const Shape& s, int64_t d, bool keepdim) {
  Shape out = s;
  if (keepdim)
    out[size_t(d)] = 1;
  else
    out.erase(out.begin() + d);
  return out;
}

Tensor sum_all(const Tensor& x_in, bool mean, const char* op) {
  check_float(x_in, op);
  Tensor x = x_in.contiguous();
  double total = 0;
  if (x.numel() > 0) total = ZT_RUN(sum_all, op, x.device(), x);
  const double factor = mean ? 1.0 / double(x.numel()) : 1.0;
  return Tensor::full({}, float(total * factor), x.dtype()).to(x.device());
}

Tensor sum_dim(const Tensor& x_in, int64_t dim, bool keepdim, bool mean, const char* op) {
  check_float(x_in, op);
  const int64_t d = norm_dim(dim, x_in.dim(), op);
  Tensor x = x_in.contiguous();
  const Split p = split(x.shape(), d);
  Tensor out = Tensor::empty(reduced_shape(x.shape(), d, keepdim), x.dtype(), x.device());
  if (out.numel() == 0) return out;
  const float factor = mean ? 1.f / float(p.r) : 1.f;
  ZT_RUN(sum_dim, op, x.device(), x, p.outer, p.r, p.inner, factor, out);
  return out;
}

}  // namespace

Tensor sum(const Tensor& x) { return sum_all(x, false, "sum"); }
Tensor mean(const Tensor& x) { return sum_all(x, true, "mean"); }
Tensor sum(const Tensor& x, int64_t dim, bool keepdim) { return sum_dim(x, dim, keepdim, false, "sum"); }
Tensor mean(const Tensor& x, int64_t dim, bool keepdim) { return sum_dim(x, dim, keepdim, true, "mean"); }

Tensor sum_backward(const Tensor& dy, const Shape& in_shape, DType dt) {
  ZT_CHECK(dy.numel() == 1, "[sum_backward] dy must have one element, got ", shape_str(dy.shape()));
  return Tensor::full(in_shape, dy.item(), dt).to(dy.device());
}
Tensor mean_backward(const Tensor& dy, const Shape& in_shape, DType dt) {
  ZT_CHECK(dy.numel() == 1, "[mean_backward] dy must have one element, got ", shape_str(dy.shape()));
  return Tensor::full(in_shape, dy.item() / float(shape_numel(in_shape)), dt).to(dy.device());
}
Tensor sum_backward(const Tensor& dy, const Shape& in_shape, int64_t dim, bool keepdim) {
  return expand_reduced(dy, in_shape, dim, keepdim, 1.f);
}
Tensor mean_backward(const Tensor& dy, const Shape& in_shape, int64_t dim, bool keepdim) {
  const int64_t d = norm_dim(dim, int64_t(in_shape.size()), "mean_backward");
  return expand_reduced(dy, in_shape, dim, keepdim, 1.f / float(in_shape[size_t(d)]));
}

Tensor expand_reduced(const Tensor& dy_in, const Shape& in_shape, int64_t dim, bool keepdim, float factor) {
  check_float(dy_in, "expand_reduced");
  const int64_t d = norm_dim(dim, int64_t(in_shape.size()), "expand_reduced");
  ZT_CHECK(dy_in.shape() == reduced_shape(in_shape, d, keepdim), "[expand_reduced] dy ", shape_str(dy_in.shape()),
           " is not ", shape_str(in_shape), " reduced over dimension ", d);
  Tensor dy = dy_in.contiguous();
  Tensor out = Tensor::empty(in_shape, dy.dtype(), dy.device());
  if (out.numel() == 0) return out;
  const Split p = split(in_shape, d);
  ZT_RUN(expand_reduced, __func__, dy.device(), dy, p.outer, p.r, p.inner, factor, out);
  return out;
}

Tensor argmax(const Tensor& x_in) {
  check_float(x_in, "argmax");
  ZT_CHECK(x_in.dim() >= 1 && x_in.size(-1) > 0, "[argmax] needs a non-empty last dimension, got ",
           shape_str(x_in.shape()));
  Tensor x = x_in.contiguous();
  Tensor out = Tensor::empty(Shape(x.shape().begin(), x.shape().end() - 1), DType::i32, x.device());
  if (out.numel() == 0) return out;
  ZT_RUN(argmax, __func__, x.device(), x, out);
  return out;
}

int64_t count_correct(const Tensor& logits, const Tensor& targets) {
  Tensor pred = argmax(logits);
  ZT_CHECK(targets.dtype() == DType::i32 && targets.shape() == pred.shape(), "[count_correct] targets must be i32 ",
           shape_str(pred.shape()), ", got ", dtype_name(targets.dtype()), " ", shape_str(targets.shape()));
  const Tensor t = targets.contiguous().to(Device::cpu()), pred_host = pred.to(Device::cpu());
  const int32_t* pp = pred_host.data<int32_t>();
  const int32_t* pt = t.data<int32_t>();
  int64_t n = 0;
  for (int64_t i = 0; i < pred.numel(); ++i) n += pp[i] == pt[i];
  return n;
}

}  // namespace zt::ops
