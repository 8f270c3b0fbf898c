// Contracts of the convolutional layers: conv2d (NCHW, square stride and padding, as torch's
// conv2d with those arguments) and max pooling with its argmax, forward and backward.
#include "zt/ops/conv.h"

#include "contract.h"
#include "cpu/conv_kernels.h"

namespace zt::ops {

using detail::check_float;

namespace {

// Validates a convolution's arguments and works out its output size.
kern::ConvGeometry geometry(const Tensor& x, const Tensor& w, Conv2dParams p, const char* op) {
  check_float(x, op);
  check_float(w, op);
  detail::check_same_dtype(x, w, op);
  ZT_CHECK(x.dim() == 4, "[", op, "] x must be [N, C, H, W], got ", shape_str(x.shape()));
  ZT_CHECK(w.dim() == 4, "[", op, "] w must be [C_out, C_in, kH, kW], got ", shape_str(w.shape()));
  ZT_CHECK(x.size(1) == w.size(1), "[", op, "] x ", shape_str(x.shape()), " has ", x.size(1), " channels but w ",
           shape_str(w.shape()), " expects ", w.size(1));
  ZT_CHECK(w.numel() > 0, "[", op, "] w ", shape_str(w.shape()), " is empty");
  ZT_CHECK(p.stride >= 1, "[", op, "] stride must be >= 1, got ", p.stride);
  ZT_CHECK(p.padding >= 0, "[", op, "] padding must be >= 0, got ", p.padding);
  const int64_t h = x.size(2) + 2 * p.padding, wd = x.size(3) + 2 * p.padding;
  ZT_CHECK(h >= w.size(2) && wd >= w.size(3), "[", op, "] the ", w.size(2), "x", w.size(3),
           " kernel is larger than the padded input ", h, "x", wd, " (x ", shape_str(x.shape()), ", padding ",
           p.padding, ")");
  return {x.size(0),
          x.size(1),
          x.size(2),
          x.size(3),
          w.size(0),
          w.size(2),
          w.size(3),
          p.stride,
          p.padding,
          (h - w.size(2)) / p.stride + 1,
          (wd - w.size(3)) / p.stride + 1};
}

}  // namespace

Tensor conv2d(const Tensor& x_in, const Tensor& w_in, const Tensor* b_in, Conv2dParams p) {
  const kern::ConvGeometry g = geometry(x_in, w_in, p, "conv2d");
  if (b_in) {
    check_float(*b_in, "conv2d");
    detail::check_same_dtype(x_in, *b_in, "conv2d");
    ZT_CHECK(b_in->dim() == 1 && b_in->size(0) == g.cout, "[conv2d] bias shape ", shape_str(b_in->shape()),
             " does not match ", g.cout, " output channels");
  }
  Tensor y = Tensor::empty({g.n, g.cout, g.ho, g.wo}, x_in.dtype(), x_in.device());
  if (y.numel() == 0) return y;
  const Tensor x = x_in.contiguous(), w = w_in.contiguous(), b = b_in ? b_in->contiguous() : Tensor();
  ZT_RUN(conv2d, __func__, x.device(), x, w, b_in ? &b : nullptr, g, y);
  return y;
}

Conv2dGrads conv2d_backward(const Tensor& dy_in, const Tensor& x_in, const Tensor& w_in, Conv2dParams p, bool need_dx,
                            bool has_bias) {
  const kern::ConvGeometry g = geometry(x_in, w_in, p, "conv2d_backward");
  check_float(dy_in, "conv2d_backward");
  detail::check_same_dtype(dy_in, x_in, "conv2d_backward");
  const Shape out{g.n, g.cout, g.ho, g.wo};
  ZT_CHECK(dy_in.shape() == out, "[conv2d_backward] dy ", shape_str(dy_in.shape()), " does not match the output ",
           shape_str(out), " of x ", shape_str(x_in.shape()), " and w ", shape_str(w_in.shape()));
  Conv2dGrads r;
  if (need_dx) r.dx = Tensor::empty(x_in.shape(), x_in.dtype(), x_in.device());
  r.dw = Tensor::empty(w_in.shape(), w_in.dtype(), w_in.device());
  if (has_bias) r.db = Tensor::empty({g.cout}, w_in.dtype(), w_in.device());
  if (g.n == 0) {  // no samples: the weights' gradients are zero
    r.dw.zero_();
    if (has_bias) r.db.zero_();
    return r;
  }
  const Tensor dy = dy_in.contiguous(), x = x_in.contiguous(), w = w_in.contiguous();
  if (need_dx) ZT_RUN(conv2d_backward_data, __func__, dy.device(), dy, w, g, r.dx);
  ZT_RUN(conv2d_backward_weights, __func__, dy.device(), dy, x, g, r.dw, has_bias ? &r.db : nullptr);
  return r;
}

MaxPoolResult max_pool2d(const Tensor& x_in, int64_t k, int64_t s) {
  check_float(x_in, "max_pool2d");
  ZT_CHECK(x_in.dim() == 4, "[max_pool2d] x must be [N, C, H, W], got ", shape_str(x_in.shape()));
  ZT_CHECK(k >= 1 && s >= 1, "[max_pool2d] kernel and stride must be >= 1, got kernel ", k, " and stride ", s);
  ZT_CHECK(x_in.size(2) >= k && x_in.size(3) >= k, "[max_pool2d] the ", k, "x", k, " window is larger than x ",
           shape_str(x_in.shape()));
  ZT_CHECK(x_in.size(2) * x_in.size(3) <= INT32_MAX, "[max_pool2d] planes of x ", shape_str(x_in.shape()),
           " are too large for i32 indices");
  const Shape out{x_in.size(0), x_in.size(1), (x_in.size(2) - k) / s + 1, (x_in.size(3) - k) / s + 1};
  MaxPoolResult r{Tensor::empty(out, x_in.dtype(), x_in.device()), Tensor::empty(out, DType::i32, x_in.device())};
  if (r.y.numel() == 0) return r;
  const Tensor x = x_in.contiguous();
  ZT_RUN(max_pool2d, __func__, x.device(), x, k, s, r.y, r.argmax);
  return r;
}

Tensor max_pool2d_backward(const Tensor& dy_in, const MaxPoolResult& saved, const Shape& x_shape) {
  check_float(dy_in, "max_pool2d_backward");
  const Tensor& am = saved.argmax;
  ZT_CHECK(am.defined() && am.dtype() == DType::i32 && am.dim() == 4,
           "[max_pool2d_backward] argmax must be a 4-D i32 "
           "tensor from max_pool2d");
  ZT_CHECK(dy_in.shape() == am.shape(), "[max_pool2d_backward] dy ", shape_str(dy_in.shape()), " and argmax ",
           shape_str(am.shape()), " differ");
  ZT_CHECK(x_shape.size() == 4 && x_shape[0] == am.size(0) && x_shape[1] == am.size(1), "[max_pool2d_backward] x ",
           shape_str(x_shape), " does not match the pooled ", shape_str(am.shape()));
  Tensor dx = Tensor::empty(x_shape, dy_in.dtype(), dy_in.device());
  if (dx.numel() == 0) return dx;
  const Tensor dy = dy_in.contiguous(), idx = am.contiguous();
  // Indices are checked here, outside the parallel kernel (which must not throw).
  const int64_t plane = x_shape[2] * x_shape[3];
  const Tensor idx_host = idx.to(Device::cpu());
  const int32_t* p = idx_host.data<int32_t>();
  for (int64_t i = 0, n = idx.numel(); i < n; ++i)
    ZT_CHECK(p[i] >= 0 && p[i] < plane, "[max_pool2d_backward] argmax ", p[i], " at flat position ", i,
             " is outside the ", x_shape[2], "x", x_shape[3], " plane");
  ZT_RUN(max_pool2d_backward, __func__, dy.device(), dy, idx, dx);
  return dx;
}

size_t conv_cache_size() { return cpu::conv_cache_size(); }
bool conv_native(DType dt) {
  ZT_CHECK(detail::is_float(dt), "[conv2d] dtype ", dtype_name(dt), " is not a float type");
  return cpu::conv_native(dt);
}
void set_conv_lowp_fallback_for_testing(bool force) { cpu::set_conv_lowp_fallback(force); }
int64_t conv_fallback_count() { return cpu::conv_fallback_count(); }

}  // namespace zt::ops
