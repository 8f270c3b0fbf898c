// Contracts of scaled dot-product attention (transformer.h): shapes, dtypes and the key mask
// are checked here; the kernels (cpu/attention.cpp) compute in f32 blocks.
#include "contract.h"
#include "cpu/kernels.h"
#include "zt/ops/transformer.h"

namespace zt::ops {

namespace {

struct Dims {
  int64_t B, T, C, K;  // C = n_head * D: out's width; K key/value heads
};

// n_kv_head 0 means n_head; it must divide n_head, and qkv's width be (n_head + 2 n_kv_head) D.
Dims check_qkv(const Tensor& qkv, int64_t n_head, int64_t n_kv_head, const char* op) {
  detail::check_float(qkv, op);
  const int64_t K = n_kv_head == 0 ? n_head : n_kv_head;
  ZT_CHECK(n_head >= 1 && K >= 1 && n_head % K == 0, "[", op, "] n_kv_head ", K, " must divide n_head ", n_head);
  if (K == n_head) {  // q, k and v of one width C each
    ZT_CHECK(qkv.dim() == 3 && qkv.size(2) % 3 == 0, "[", op, "] qkv must be [B, T, 3C], got ",
             shape_str(qkv.shape()));
    const int64_t C = qkv.size(2) / 3;
    ZT_CHECK(C > 0 && C % n_head == 0, "[", op, "] n_head ", n_head, " must divide C = ", C, " (qkv ",
             shape_str(qkv.shape()), ")");
    return {qkv.size(0), qkv.size(1), C, K};
  }
  const int64_t heads = n_head + 2 * K;
  ZT_CHECK(qkv.dim() == 3 && qkv.size(2) > 0 && qkv.size(2) % heads == 0, "[", op, "] qkv must be [B, T, (", n_head,
           " + 2 x ", K, ") D], got ", shape_str(qkv.shape()));
  return {qkv.size(0), qkv.size(1), qkv.size(2) / heads * n_head, K};
}

// The contiguous key mask, or an undefined tensor when there is none.
Tensor check_mask(const Tensor* key_mask, const Dims& d, const char* op) {
  if (!key_mask) return Tensor();
  ZT_CHECK(key_mask->defined() && key_mask->dtype() == DType::i32, "[", op, "] key_mask must be i32, got ",
           key_mask->defined() ? dtype_name(key_mask->dtype()) : "an undefined tensor");
  ZT_CHECK(key_mask->shape() == Shape({d.B, d.T}), "[", op, "] key_mask must be [B, T] = ", shape_str({d.B, d.T}),
           ", got ", shape_str(key_mask->shape()));
  return key_mask->contiguous();
}

}  // namespace

AttentionResult attention(const Tensor& qkv_in, int64_t n_head, bool causal, const Tensor* key_mask,
                          int64_t n_kv_head) {
  const Dims d = check_qkv(qkv_in, n_head, n_kv_head, "attention");
  const Tensor mask = check_mask(key_mask, d, "attention");
  Tensor qkv = qkv_in.contiguous();
  AttentionResult r;
  r.out = Tensor::empty({d.B, d.T, d.C}, qkv.dtype(), qkv.device());
  r.lse = Tensor::empty({d.B, n_head, d.T}, DType::f32, qkv.device());
  if (r.out.numel() == 0) return r;
  ZT_RUN(attention, __func__, qkv.device(), qkv, n_head, d.K, causal, mask.defined() ? &mask : nullptr, r.out, r.lse);
  return r;
}

std::string attention_path(Device d, DType dt, int64_t n_head, int64_t n_kv_head, int64_t head_size, bool key_mask) {
  ZT_CHECK(n_head >= 1 && n_kv_head >= 1 && n_head % n_kv_head == 0 && head_size >= 1, "[attention] ", n_kv_head,
           " key/value heads must divide ", n_head, " query heads of size ", head_size);
  return ZT_RUN(attention_path, __func__, d, dt, n_head, n_kv_head, head_size, key_mask);
}

Tensor attention_backward(const Tensor& dout_in, const Tensor& qkv_in, const AttentionResult& saved, int64_t n_head,
                          bool causal, const Tensor* key_mask, int64_t n_kv_head) {
  const char* op = "attention_backward";
  const Dims d = check_qkv(qkv_in, n_head, n_kv_head, op);
  const Tensor mask = check_mask(key_mask, d, op);
  detail::check_float(dout_in, op);
  detail::check_same_dtype(dout_in, qkv_in, op);
  ZT_CHECK(saved.out.defined() && saved.lse.defined(), "[", op, "] the saved forward result is missing");
  const Shape out_shape{d.B, d.T, d.C};
  ZT_CHECK(dout_in.shape() == out_shape, "[", op, "] dout must be ", shape_str(out_shape), ", got ",
           shape_str(dout_in.shape()));
  ZT_CHECK(saved.out.shape() == out_shape && saved.out.dtype() == qkv_in.dtype(), "[", op, "] saved out ",
           shape_str(saved.out.shape()), " ", dtype_name(saved.out.dtype()), " does not match qkv");
  ZT_CHECK(saved.lse.shape() == Shape({d.B, n_head, d.T}) && saved.lse.dtype() == DType::f32, "[", op, "] saved lse ",
           shape_str(saved.lse.shape()), " ", dtype_name(saved.lse.dtype()), " must be f32 [B, n_head, T]");
  Tensor qkv = qkv_in.contiguous(), dout = dout_in.contiguous();
  Tensor out = saved.out.contiguous(), lse = saved.lse.contiguous();
  Tensor dqkv = Tensor::empty(qkv.shape(), qkv.dtype(), qkv.device());
  if (dqkv.numel() == 0) return dqkv;
  ZT_RUN(attention_backward, __func__, qkv.device(), dout, qkv, out, lse, n_head, d.K, causal,
         mask.defined() ? &mask : nullptr, dqkv);
  return dqkv;
}

}  // namespace zt::ops
