// Contracts of the matrix products (matmul, linear) and their backward: shape and dtype checks,
// output allocation, dispatch to the backend.
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <utility>

#include "contract.h"
#include "cpu/conv_kernels.h"
#include "cpu/kernels.h"
#include "zt/core/parallel.h"
#include "zt/ops/ops.h"

namespace zt::ops {

using detail::check_float;

namespace {

// (batch, rows, cols) of op(t) for a 2-D or 3-D t.
struct Dims {
  int64_t b, r, c;
};
Dims dims(const Tensor& t, bool trans) {
  const bool three = t.dim() == 3;
  const int64_t r = t.size(three ? 1 : 0), c = t.size(three ? 2 : 1);
  return {three ? t.size(0) : 1, trans ? c : r, trans ? r : c};
}

// Allocates out_shape and runs out = op(a) @ op(b) (+ bias) on the backend.
Tensor product(const Tensor& a, bool ta, const Tensor& b, bool tb, const Tensor* bias, const Shape& out_shape) {
  Tensor out = Tensor::empty(out_shape, a.dtype(), a.device());
  if (out.numel() == 0) return out;
  ZT_RUN(matmul, "matmul", a.device(), a, ta, b, tb, bias, out);
  return out;
}

// x [..., in] as a 2-D [rows, in] matrix (a view when possible).
Tensor rows_of(const Tensor& x) {
  if (x.dim() == 1) return x.reshape({1, x.size(0)});
  return x.dim() == 2 ? x : x.reshape({-1, x.size(-1)});
}

Shape with_last(const Shape& s, int64_t last) {
  Shape r = s;
  r.back() = last;
  return r;
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b, bool trans_a, bool trans_b) {
  check_float(a, "matmul");
  check_float(b, "matmul");
  detail::check_same_dtype(a, b, "matmul");
  ZT_CHECK((a.dim() == 2 || a.dim() == 3) && a.dim() == b.dim(), "[matmul] needs two 2-D or two 3-D tensors, got ",
           shape_str(a.shape()), " and ", shape_str(b.shape()));
  const Dims da = dims(a, trans_a), db = dims(b, trans_b);
  ZT_CHECK(da.c == db.r, "[matmul] inner dimensions ", da.c, " and ", db.r, " differ (shapes ", shape_str(a.shape()),
           trans_a ? "^T" : "", " and ", shape_str(b.shape()), trans_b ? "^T" : "", ")");
  ZT_CHECK(da.b == db.b, "[matmul] batch sizes ", da.b, " and ", db.b, " differ");
  return product(a, trans_a, b, trans_b, nullptr, a.dim() == 3 ? Shape{da.b, da.r, db.c} : Shape{da.r, db.c});
}

BinaryGrads matmul_backward(const Tensor& dy, const Tensor& a, const Tensor& b, bool need_a, bool need_b) {
  BinaryGrads g;
  if (need_a) g.da = matmul(dy, b, false, true);  // dA = dC @ B^T
  if (need_b) g.db = matmul(a, dy, true, false);  // dB = A^T @ dC
  return g;
}

Tensor linear(const Tensor& x, const Tensor& w, const Tensor* b) {
  check_float(x, "linear");
  check_float(w, "linear");
  detail::check_same_dtype(x, w, "linear");
  ZT_CHECK(x.dim() >= 1 && w.dim() == 2, "[linear] needs x [..., in] and w [out, in], got ", shape_str(x.shape()),
           " and ", shape_str(w.shape()));
  ZT_CHECK(x.size(-1) == w.size(1), "[linear] x has ", x.size(-1), " input features but w ", shape_str(w.shape()),
           " expects ", w.size(1));
  if (b) {
    check_float(*b, "linear");
    detail::check_same_dtype(x, *b, "linear");
    ZT_CHECK(b->dim() == 1 && b->size(0) == w.size(0), "[linear] bias shape ", shape_str(b->shape()),
             " does not match ", w.size(0), " outputs");
  }
  Tensor x2 = rows_of(x);
  Tensor y = product(x2, false, w, true, b, {x2.size(0), w.size(0)});
  return y.view(with_last(x.shape(), w.size(0)));
}

LinearGrads linear_backward(const Tensor& dy, const Tensor& x, const Tensor& w, bool need_dx, bool has_bias,
                            bool need_dw) {
  check_float(dy, "linear_backward");
  detail::check_same_dtype(dy, w, "linear_backward");
  ZT_CHECK(dy.dim() >= 1 && dy.size(-1) == w.size(0), "[linear_backward] dy ", shape_str(dy.shape()),
           " does not match w ", shape_str(w.shape()));
  Tensor dy2 = rows_of(dy), x2 = rows_of(x);
  ZT_CHECK(x2.size(0) == dy2.size(0), "[linear_backward] x ", shape_str(x.shape()), " and dy ", shape_str(dy.shape()),
           " have different row counts");
  LinearGrads g;
  if (need_dx) g.dx = product(dy2, false, w, false, nullptr, {dy2.size(0), w.size(1)}).view(x.shape());
  if (need_dw) g.dw = product(dy2, true, x2, false, nullptr, w.shape());
  if (has_bias) g.db = sum(dy2, 0, false);
  return g;
}

// Note [weight gradients in row blocks]: blocks split the rows evenly (in 64s), so the
// temporary is one allocation reused by every block. Measured (GPT-2 124M's head, 50257 x 768
// from 256 rows, 2 threads, AVX512-BF16): oneDNN's bf16 product of a transposed dy with 50257
// rows took 32-46 ms, in blocks 28-29 ms; fp32's product is no faster in blocks, but each
// block's add reads it from cache: the step fell 1.5% (fp32) and 4.7% (bf16), the peak by the
// [V, C] temporary.
bool weight_grad_in_blocks(int64_t rows) { return rows > kGradRowBlock; }
int64_t weight_grad_block_rows(int64_t rows) {
  if (!weight_grad_in_blocks(rows)) return rows;
  const int64_t blocks = (rows + kGradRowBlock - 1) / kGradRowBlock, even = (rows + blocks - 1) / blocks;
  return (even + 63) / 64 * 64;  // 64 rows: each block's start stays aligned for cuBLASLt's 16-bit kernels
}

// Note [gradients written in place]: a slot whose values are not a gradient yet (zeros, or a
// step's stale values: Note [stale gradient slots] in zero/grad_reducer.cpp) takes the product
// itself, as beta = 0 would: no temporary and no add pass over [out, in] (GPT-2 124M: 124M
// elements a step read twice and written once less). Bit for bit the sum 0 + p = p. Where the
// slot's dtype differs or it is not 16-byte aligned (cuBLASLt's 16-bit kernels want that) the
// product goes through a temporary, cast into the slot (not added).
void add_linear_weight_grad(Tensor& slot, const Tensor& dy, const Tensor& x, bool zeroed, int64_t row0) {
  check_float(dy, "add_linear_weight_grad");
  check_float(slot, "add_linear_weight_grad");
  detail::check_same_dtype(dy, x, "add_linear_weight_grad");
  Tensor dy2 = rows_of(dy), x2 = rows_of(x);
  ZT_CHECK(slot.dim() == 2 && row0 >= 0 && row0 + slot.size(0) <= dy2.size(1) && slot.size(1) == x2.size(1) &&
               dy2.size(0) == x2.size(0),
           "[add_linear_weight_grad] slot ", shape_str(slot.shape()), " from row ", row0,
           " is not within dy^T x for dy ", shape_str(dy.shape()), " and x ", shape_str(x.shape()));
  if (slot.numel() == 0) return;
  const bool direct = zeroed && slot.dtype() == dy.dtype() && slot.is_contiguous() &&
                      reinterpret_cast<uintptr_t>(slot.raw_data()) % 16 == 0;
  const int64_t rows = slot.size(0), block = weight_grad_block_rows(rows);
  Tensor tmp = direct ? Tensor() : Tensor::empty({block, slot.size(1)}, dy.dtype(), dy.device());
  for (int64_t r0 = 0; r0 < rows; r0 += block) {
    const int64_t n = std::min(block, rows - r0);
    Tensor dst = slot.slice(0, r0, r0 + n), part = direct ? dst : tmp.slice(0, 0, n);
    ZT_RUN(matmul, "matmul", dy.device(), dy2.slice(1, row0 + r0, row0 + r0 + n), true, x2, false, nullptr, part);
    if (direct) continue;
    if (zeroed && dst.is_contiguous()) {
      cast_into(dst, part);  // 0 + p rounded once is p rounded once (f32 products of a 16-bit slot)
      continue;
    }
    if (zeroed) dst.zero_();  // a strided view of a stale slot: zeros first, then the add
    if (dst.dtype() == part.dtype())
      add_(dst, part);
    else
      axpy_(dst, 1.f, part);
  }
}

LinearGrads linear_gelu_backward(const Tensor& dy, const Tensor& x, const Tensor& w, const Tensor& h, bool need_dx,
                                 bool has_bias, bool need_dw, Tensor* dh_out, Gelu form) {
  Tensor db, dh;
  if (has_bias) {
    GeluBiasGrads gb = gelu_bias_backward(dy, h, form);  // db in the same pass (Note [fused bias-gelu])
    dh = std::move(gb.dh);
    db = std::move(gb.db);
  } else {
    dh = gelu_backward(dy, h, form);
  }
  LinearGrads g = linear_backward(dh, x, w, need_dx, /*has_bias=*/false, need_dw);
  g.db = std::move(db);
  if (dh_out) *dh_out = std::move(dh);
  return g;
}

size_t matmul_cache_size() { return cpu::matmul_cache_size(); }
bool matmul_native(DType dt) {
  ZT_CHECK(detail::is_float(dt), "[matmul] dtype ", dtype_name(dt), " is not a float type");
  return cpu::matmul_native(dt);
}
void set_matmul_lowp_fallback_for_testing(bool force) { cpu::set_matmul_lowp_fallback(force); }
int64_t matmul_fallback_count() { return cpu::matmul_fallback_count(); }

void set_lowp_products(Products p) {
  cpu::set_matmul_lowp_fallback(p == Products::f32);
  cpu::set_conv_lowp_fallback(p == Products::f32);
}
Products lowp_products() { return cpu::matmul_lowp_fallback() ? Products::f32 : Products::native; }
const char* products_name(Products p) { return p == Products::f32 ? "f32" : "native"; }
bool cpu_has_amx() { return cpu::cpu_has_amx(); }

ProductTimes time_lowp_products(DType dt, int64_t m, int64_t k, int64_t n, int reps) {
  ZT_CHECK(dt == DType::bf16 || dt == DType::f16, "[products] timing needs a 16-bit dtype, not ", dtype_name(dt));
  const bool matmul_was = cpu::matmul_lowp_fallback(), conv_was = cpu::conv_lowp_fallback();
  // One thread: the kernels' relative speed is the processor's, and a thread team on a busy
  // machine (ranks and tests sharing cores) would time its barriers instead.
  const ThreadCountGuard one_thread(1);
  // The f32 path is timed as a run takes it (Note [f32 compute]): f32 operands, nothing widened.
  auto operands = [&](DType d) {
    return std::array<Tensor, 3>{Tensor::full({m, k}, 0.5f, d), Tensor::full({n, k}, 0.25f, d),
                                 Tensor::full({m, n}, 1.f, d)};
  };
  const std::array<Tensor, 3> low = operands(dt), wide = operands(DType::f32);
  auto once = [&](Products p) {
    set_lowp_products(p);
    const auto& [x, w, dy] = p == Products::native ? low : wide;
    const auto t0 = std::chrono::steady_clock::now();
    (void)linear(x, w, nullptr);
    (void)linear_backward(dy, x, w, /*need_dx=*/true, /*has_bias=*/false);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  once(Products::native);  // warm-up: primitives created, memory touched
  once(Products::f32);
  ProductTimes best{1e30, 1e30};
  // Interleaved, so a busy moment hits both alike; small products repeat for 50 ms at least (up
  // to 2000 times), so that a preempted repetition or two cannot decide.
  double spent = 0;
  for (int r = 0; r < std::max(1, reps) || (spent < 0.05 && r < 2000); ++r) {
    const double n = once(Products::native), f = once(Products::f32);
    best.native_s = std::min(best.native_s, n);
    best.f32_s = std::min(best.f32_s, f);
    spent += n + f;
  }
  cpu::set_matmul_lowp_fallback(matmul_was);
  cpu::set_conv_lowp_fallback(conv_was);
  return best;
}

}  // namespace zt::ops
