// Contracts of the Llama family's ops (transformer.h): RMSNorm, rotary position embeddings and
// SwiGLU, with their backward. Kernels compute in f32 whatever the storage dtype.
#include <cmath>
#include <string>
#include <vector>

#include "contract.h"
#include "zt/ops/transformer.h"

namespace zt::ops {

using detail::check_float;

namespace {

int64_t rows_of(const Tensor& x) { return x.dim() == 0 ? 0 : x.numel() / std::max<int64_t>(1, x.size(-1)); }

void check_gain(const Tensor& x, const Tensor& gamma, const char* op) {
  check_float(x, op);
  check_float(gamma, op);
  ZT_CHECK(x.dim() >= 1, "[", op, "] needs at least one dimension, got a 0-d tensor");
  ZT_CHECK(gamma.shape() == Shape{x.size(-1)}, "[", op, "] gamma ", shape_str(gamma.shape()), " must be [",
           x.size(-1), "] for x ", shape_str(x.shape()));
}

// The head size of a packed qkv of n_head query and n_kv_head key/value heads.
int64_t head_size(const Tensor& qkv, int64_t n_head, int64_t n_kv_head, const char* op) {
  check_float(qkv, op);
  ZT_CHECK(n_head >= 1 && n_kv_head >= 1 && n_head % n_kv_head == 0, "[", op, "] n_kv_head ", n_kv_head,
           " must divide n_head ", n_head);
  const int64_t heads = n_head + 2 * n_kv_head;
  ZT_CHECK(qkv.dim() == 3 && qkv.size(2) > 0 && qkv.size(2) % heads == 0, "[", op, "] qkv must be [B, T, (", n_head,
           " + 2 x ", n_kv_head, ") D], got ", shape_str(qkv.shape()));
  const int64_t D = qkv.size(2) / heads;
  ZT_CHECK(D % 2 == 0, "[", op, "] rotary embeddings pair the halves of each head: head size ", D, " must be even");
  return D;
}

}  // namespace

RmsNormResult rms_norm(const Tensor& x_in, const Tensor& gamma_in, float eps, const Tensor* residual) {
  check_gain(x_in, gamma_in, "rms_norm");
  ZT_CHECK(eps > 0.f, "[rms_norm] eps must be > 0, got ", eps);
  Tensor x = x_in.contiguous(), gamma = gamma_in.contiguous();
  const Tensor res = detail::checked_residual(residual, x, "rms_norm");
  RmsNormResult r{Tensor::empty(x.shape(), x.dtype(), x.device()), Tensor::empty({rows_of(x)}, DType::f32, x.device()),
                  res.defined() ? Tensor::empty(x.shape(), x.dtype(), x.device()) : Tensor()};
  if (x.numel() == 0) {
    r.rstd.fill_(1.f / std::sqrt(eps));
    return r;
  }
  ZT_RUN(rms_norm, __func__, x.device(), x, res.defined() ? &res : nullptr, gamma, eps,
         res.defined() ? &r.sum : nullptr, r.y, r.rstd);
  return r;
}

RmsNormGrads rms_norm_backward(const Tensor& dy_in, const Tensor& x_in, const Tensor& gamma_in,
                               const RmsNormResult& saved, Tensor* dx_into, bool accumulate) {
  const char* op = "rms_norm_backward";
  check_float(dy_in, op);
  check_gain(x_in, gamma_in, op);
  detail::check_same_dtype(dy_in, x_in, op);
  detail::check_same_shape(dy_in, x_in, op, "dy", "x");
  const int64_t rows = rows_of(x_in);
  ZT_CHECK(saved.rstd.defined() && saved.rstd.dtype() == DType::f32 && saved.rstd.shape() == Shape{rows}, "[", op,
           "] saved rstd must be f32 [", rows, "]");
  Tensor dy = dy_in.contiguous(), x = x_in.contiguous(), gamma = gamma_in.contiguous(), rstd = saved.rstd.contiguous();
  ZT_CHECK(dx_into || !accumulate, "[", op, "] accumulate needs dx_into, the gradient to add dx to");
  if (dx_into) detail::check_dx_into(*dx_into, x, dy, op);
  RmsNormGrads g{dx_into ? Tensor() : Tensor::empty(x.shape(), x.dtype(), x.device()),
                 Tensor::empty(gamma.shape(), gamma.dtype(), x.device())};
  if (x.numel() == 0) {
    g.dgamma.zero_();
    return g;
  }
  ZT_RUN(rms_norm_backward, __func__, x.device(), dy, x, gamma, rstd, dx_into && accumulate,
         dx_into ? *dx_into : g.dx, g.dgamma);
  return g;
}

RopeTables rope_tables(int64_t T, int64_t D, float theta, Device device) {
  ZT_CHECK(T >= 0 && D >= 2 && D % 2 == 0, "[rope] head size ", D, " must be even and positive (T ", T, ")");
  ZT_CHECK(theta > 0.f && std::isfinite(theta), "[rope] theta must be > 0, got ", theta);
  const int64_t half = D / 2;
  std::vector<float> c(size_t(T * half)), s(size_t(T * half));
  for (int64_t i = 0; i < half; ++i) {
    // As transformers' default rope init: 1 / theta ** (arange(0, D, 2).float() / D), in f32.
    const float inv = 1.f / std::pow(theta, float(2 * i) / float(D));
    for (int64_t t = 0; t < T; ++t) {
      const double angle = double(float(t) * inv);  // f32 product, as position_ids.float() @ inv_freq
      c[size_t(t * half + i)] = float(std::cos(angle));
      s[size_t(t * half + i)] = float(std::sin(angle));
    }
  }
  return {Tensor::from_vector(c, {T, half}, DType::f32, device), Tensor::from_vector(s, {T, half}, DType::f32, device)};
}

Tensor rope(const Tensor& qkv_in, int64_t n_head, int64_t n_kv_head, const RopeTables& tables, bool inverse) {
  const int64_t D = head_size(qkv_in, n_head, n_kv_head, "rope");
  for (const Tensor* t : {&tables.cos, &tables.sin})
    ZT_CHECK(t->defined() && t->dtype() == DType::f32 && t->dim() == 2 && t->size(0) >= qkv_in.size(1) &&
                 t->size(1) == D / 2 && t->is_contiguous(),
             "[rope] tables must be f32 [>= ", qkv_in.size(1), ", ", D / 2, "], got ",
             t->defined() ? shape_str(t->shape()) : std::string("undefined"));
  Tensor qkv = qkv_in.contiguous();
  Tensor out = Tensor::empty(qkv.shape(), qkv.dtype(), qkv.device());
  if (out.numel() == 0) return out;
  ZT_RUN(rope, __func__, qkv.device(), qkv, n_head, n_kv_head, tables.cos, tables.sin, inverse, out);
  return out;
}

Tensor swiglu(const Tensor& gate_up_in) {
  check_float(gate_up_in, "swiglu");
  ZT_CHECK(gate_up_in.dim() >= 1 && gate_up_in.size(-1) % 2 == 0, "[swiglu] the last dimension holds gate and up: ",
           shape_str(gate_up_in.shape()), " must end in an even size");
  Tensor gate_up = gate_up_in.contiguous();
  Shape s = gate_up.shape();
  s.back() /= 2;
  Tensor out = Tensor::empty(s, gate_up.dtype(), gate_up.device());
  if (out.numel() == 0) return out;
  ZT_RUN(swiglu, __func__, gate_up.device(), gate_up, out);
  return out;
}

Tensor swiglu_backward(const Tensor& dy_in, const Tensor& gate_up_in) {
  const char* op = "swiglu_backward";
  check_float(dy_in, op);
  check_float(gate_up_in, op);
  detail::check_same_dtype(dy_in, gate_up_in, op);
  Shape s = gate_up_in.shape();
  ZT_CHECK(!s.empty() && s.back() % 2 == 0, "[", op, "] gate_up ", shape_str(s), " must end in an even size");
  s.back() /= 2;
  ZT_CHECK(dy_in.shape() == s, "[", op, "] dy must be ", shape_str(s), ", got ", shape_str(dy_in.shape()));
  Tensor dy = dy_in.contiguous(), gate_up = gate_up_in.contiguous();
  Tensor d = Tensor::empty(gate_up.shape(), gate_up.dtype(), gate_up.device());
  if (d.numel() == 0) return d;
  ZT_RUN(swiglu_backward, __func__, gate_up.device(), dy, gate_up, d);
  return d;
}

}  // namespace zt::ops
