// Contracts of the transformer layer ops but attention (attention.cpp): embedding, layer norm
// and dropout, with their backward. Kernels compute in f32 whatever the storage dtype.
#include "zt/ops/transformer.h"

#include <cmath>
#include <string>

#include "contract.h"
#include "cpu/kernels.h"

namespace zt::ops {

using detail::check_float;

namespace {

// ids must be i32 with every value in [0, num_rows); returns them contiguous.
Tensor checked_ids(const Tensor& ids_in, int64_t num_rows, const char* op) {
  ZT_CHECK(ids_in.defined(), "[", op, "] undefined ids");
  ZT_CHECK(ids_in.dtype() == DType::i32, "[", op, "] ids must be i32, got ", dtype_name(ids_in.dtype()));
  Tensor ids = ids_in.contiguous();
  const Tensor host = ids.to(Device::cpu());  // checked on the host, whatever the device
  const int32_t* p = host.data<int32_t>();
  for (int64_t i = 0; i < ids.numel(); ++i)
    ZT_CHECK(p[i] >= 0 && p[i] < num_rows, "[", op, "] id ", p[i], " at position ", i, " is outside [0, ", num_rows,
             ")");
  return ids;
}

Shape with_last(Shape s, int64_t c) {
  s.push_back(c);
  return s;
}

// The leading dimensions of x flattened: layer norm's rows (x has at least one dimension).
int64_t rows_of(const Tensor& x) {
  int64_t r = 1;
  for (int64_t d = 0; d + 1 < x.dim(); ++d) r *= x.size(d);
  return r;
}

void check_affine(const Tensor& x, const Tensor& gamma, const Tensor& beta, const char* op) {
  check_float(x, op);
  check_float(gamma, op);
  check_float(beta, op);
  ZT_CHECK(x.dim() >= 1, "[", op, "] needs at least one dimension, got a 0-d tensor");
  const Shape c{x.size(-1)};
  ZT_CHECK(gamma.shape() == c && beta.shape() == c, "[", op, "] gamma ", shape_str(gamma.shape()), " and beta ",
           shape_str(beta.shape()), " must be ", shape_str(c), " for x ", shape_str(x.shape()));
}

void check_p(float p, const char* op) { ZT_CHECK(p >= 0.f && p < 1.f, "[", op, "] p must be in [0, 1), got ", p); }

}  // namespace

Tensor embedding(const Tensor& weight_in, const Tensor& ids_in) {
  check_float(weight_in, "embedding");
  ZT_CHECK(weight_in.dim() == 2, "[embedding] weight must be [V, C], got ", shape_str(weight_in.shape()));
  Tensor ids = checked_ids(ids_in, weight_in.size(0), "embedding");
  Tensor weight = weight_in.contiguous();
  Tensor out = Tensor::empty(with_last(ids.shape(), weight.size(1)), weight.dtype(), weight.device());
  if (out.numel() == 0) return out;
  ZT_RUN(embedding, __func__, weight.device(), weight, ids, out);
  return out;
}

Tensor embedding_backward(const Tensor& dy_in, const Tensor& ids_in, int64_t num_rows, DType dt) {
  check_float(dy_in, "embedding_backward");
  ZT_CHECK(detail::is_float(dt), "[embedding_backward] gradient dtype ", dtype_name(dt), " is not a float type");
  ZT_CHECK(num_rows >= 0, "[embedding_backward] num_rows ", num_rows, " is negative");
  Tensor ids = checked_ids(ids_in, num_rows, "embedding_backward");
  ZT_CHECK(dy_in.dim() == ids.dim() + 1 && with_last(ids.shape(), dy_in.size(-1)) == dy_in.shape(),
           "[embedding_backward] dy ", shape_str(dy_in.shape()), " does not match ids ", shape_str(ids.shape()),
           " plus one dimension");
  Tensor dy = dy_in.contiguous();
  Tensor out = Tensor::empty({num_rows, dy.size(-1)}, dt, dy.device());
  if (out.numel() == 0) return out;
  ZT_RUN(embedding_backward, __func__, dy.device(), dy, ids, out);
  return out;
}

void embedding_backward_add(const Tensor& dy_in, const Tensor& ids_in, DType dt, Tensor dst) {
  check_float(dy_in, "embedding_backward_add");
  check_float(dst, "embedding_backward_add");
  ZT_CHECK(detail::is_float(dt), "[embedding_backward_add] gradient dtype ", dtype_name(dt), " is not a float type");
  ZT_CHECK(dst.dim() == 2 && dst.is_contiguous() && dst.device() == dy_in.device(),
           "[embedding_backward_add] adds into a contiguous [V, C] on dy's device, got ", shape_str(dst.shape()));
  Tensor ids = checked_ids(ids_in, dst.size(0), "embedding_backward_add");
  ZT_CHECK(dy_in.dim() == ids.dim() + 1 && with_last(ids.shape(), dst.size(1)) == dy_in.shape(),
           "[embedding_backward_add] dy ", shape_str(dy_in.shape()), " does not match ids ", shape_str(ids.shape()),
           " and rows of ", dst.size(1));
  if (dst.numel() == 0) return;
  Tensor dy = dy_in.contiguous();
  ZT_RUN(embedding_backward_add, __func__, dy.device(), dy, ids, dt, dst);
}

std::vector<int32_t> touched_rows(const Tensor& ids_in, int64_t num_rows) {
  Tensor ids = checked_ids(ids_in, num_rows, "touched_rows");
  return ZT_RUN(touched_rows, __func__, ids.device(), ids, num_rows);
}

LayerNormResult layer_norm(const Tensor& x_in, const Tensor& gamma_in, const Tensor& beta_in, float eps,
                           const Tensor* residual) {
  check_affine(x_in, gamma_in, beta_in, "layer_norm");
  ZT_CHECK(eps >= 0.f, "[layer_norm] eps must be >= 0, got ", eps);
  Tensor x = x_in.contiguous(), gamma = gamma_in.contiguous(), beta = beta_in.contiguous();
  const Tensor res = detail::checked_residual(residual, x, "layer_norm");
  const int64_t rows = rows_of(x);
  LayerNormResult r{Tensor::empty(x.shape(), x.dtype(), x.device()), Tensor::empty({rows}, DType::f32, x.device()),
                    Tensor::empty({rows}, DType::f32, x.device()),
                    res.defined() ? Tensor::empty(x.shape(), x.dtype(), x.device()) : Tensor()};
  if (x.numel() == 0) {  // rows of no values: mean 0, rstd of the variance 0
    r.mean.fill_(0.f);
    r.rstd.fill_(rows ? 1.f / std::sqrt(eps) : 0.f);
    return r;
  }
  ZT_RUN(layer_norm, __func__, x.device(), x, res.defined() ? &res : nullptr, gamma, beta, eps,
         res.defined() ? &r.sum : nullptr, r.y, r.mean, r.rstd);
  return r;
}

LayerNormGrads layer_norm_backward(const Tensor& dy_in, const Tensor& x_in, const Tensor& gamma_in,
                                   const LayerNormResult& saved, Tensor* dx_into, bool accumulate) {
  const char* op = "layer_norm_backward";
  check_float(dy_in, op);
  check_affine(x_in, gamma_in, gamma_in, op);
  detail::check_same_dtype(dy_in, x_in, op);
  detail::check_same_shape(dy_in, x_in, op, "dy", "x");
  const int64_t rows = rows_of(x_in);
  for (const Tensor* s : {&saved.mean, &saved.rstd})
    ZT_CHECK(s->defined() && s->dtype() == DType::f32 && s->shape() == Shape{rows}, "[", op,
             "] saved mean and rstd must be f32 [", rows, "], got ",
             s->defined() ? shape_str(s->shape()) : std::string("undefined"));
  Tensor dy = dy_in.contiguous(), x = x_in.contiguous(), gamma = gamma_in.contiguous();
  Tensor mean = saved.mean.contiguous(), rstd = saved.rstd.contiguous();
  ZT_CHECK(dx_into || !accumulate, "[", op, "] accumulate needs dx_into, the gradient to add dx to");
  if (dx_into) detail::check_dx_into(*dx_into, x, dy, op);
  LayerNormGrads g{dx_into ? Tensor() : Tensor::empty(x.shape(), x.dtype(), x.device()),
                   Tensor::empty(gamma.shape(), gamma.dtype(), x.device()),
                   Tensor::empty(gamma.shape(), gamma.dtype(), x.device())};
  if (x.numel() == 0) {
    g.dgamma.zero_();
    g.dbeta.zero_();
    return g;
  }
  ZT_RUN(layer_norm_backward, __func__, x.device(), dy, x, gamma, mean, rstd, dx_into && accumulate,
         dx_into ? *dx_into : g.dx, g.dgamma, g.dbeta);
  return g;
}

Tensor dropout(const Tensor& x_in, float p, uint64_t seed) {
  check_float(x_in, "dropout");
  check_p(p, "dropout");
  Tensor x = x_in.contiguous();
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
  if (out.numel() == 0) return out;
  ZT_RUN(dropout, __func__, x.device(), x, p, seed, out);
  return out;
}

// The same mask on the same element indices: dy is masked and scaled exactly as x was.
Tensor dropout_backward(const Tensor& dy, float p, uint64_t seed) {
  check_float(dy, "dropout_backward");
  check_p(p, "dropout_backward");
  return dropout(dy, p, seed);
}

}  // namespace zt::ops
