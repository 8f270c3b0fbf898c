#pragma once
// Op contracts: forward and backward as pure functions on tensors (no autograd here; the
// autograd layer records them). Inputs may be strided (they are made contiguous first);
// outputs are new contiguous tensors tagged current_tag(). Floating ops accept f32, bf16 and
// f16 (16-bit types compute in f32 and round the result once); binary ops need equal dtypes.
// Errors name the op: "[matmul] inner dimensions 3 and 4 differ".
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "zt/core/tensor.h"
#include "zt/ops/gelu.h"

namespace zt::ops {

// Elements per parallel chunk of cheap elementwise work (below it, one thread does it all).
inline constexpr int64_t kGrain = int64_t(1) << 15;
// Fixed chunk of sum_of_squares, as optim::kClipGrain: the result is independent of threads.
inline constexpr int64_t kReduceChunk = int64_t(1) << 14;

// Backends compiled in ("cpu", and "cuda" when built with CUDA; Note [kernel table] in
// src/ops/kernel_table.h): an op runs on its inputs' device, and its outputs live there.
std::vector<std::string> backends();
std::vector<std::string> kernel_names();  // every kernel a backend may provide
// Whether d's backend has `kernel` (one of kernel_names(); throws for another name). An op whose
// kernel is missing throws one clear error naming the kernel and the device.
bool supports(const std::string& kernel, Device d);

// ---- precision: whole-buffer kernels for mixed-precision training (contiguous fast paths) ----
Tensor cast(const Tensor& x, DType dt);          // converting copy (f32/bf16/f16), new tensor
void cast_into(Tensor& dst, const Tensor& src);  // dst contiguous, same numel, any float dtypes
void scale_(Tensor& x, float s);                 // x *= s in place (x contiguous), f32 compute
// Sum of x^2 in double with fixed chunking (kReduceChunk); for f32 bitwise equal to optim's.
double sum_of_squares(const Tensor& x);
// The same sum left where x lives, as a double's bits in slot `slot` of out (i64, x's device): a
// step's per-buffer sums come back to the host in one read.
void sum_of_squares_to(const Tensor& x, Tensor& out, int64_t slot);
bool has_nonfinite(const Tensor& x);  // any inf or NaN (fp16 overflow check)

// Gradients of a two-input op; each is undefined unless asked for.
struct BinaryGrads {
  Tensor da, db;
};

// ---- matrix products (oneDNN; bf16/f16 accumulate in f32) ----
// C = op(A) @ op(B) for 2-D A, B; or batched 3-D with equal batch. op transposes when asked.
Tensor matmul(const Tensor& a, const Tensor& b, bool trans_a = false, bool trans_b = false);
BinaryGrads matmul_backward(const Tensor& dy, const Tensor& a, const Tensor& b, bool need_a, bool need_b);
// y = x @ w^T + b; x [..., in], w [out, in], b [out] (optional) -> [..., out].
Tensor linear(const Tensor& x, const Tensor& w, const Tensor* b);
struct LinearGrads {
  Tensor dx, dw, db;  // dx undefined unless need_dx; db undefined unless has_bias
};
LinearGrads linear_backward(const Tensor& dy, const Tensor& x, const Tensor& w, bool need_dx, bool has_bias,
                            bool need_dw = true);
// Note [weight gradients in row blocks]: a weight of more than kGradRowBlock rows (an LM head's
// [V, C]) has its gradient dy^T x made and added into the slot a block of rows at a time, so
// backward never holds the whole [out, in] product, and 16-bit kernels run at their speed.
constexpr int64_t kGradRowBlock = 4096;
bool weight_grad_in_blocks(int64_t rows);      // rows > kGradRowBlock
int64_t weight_grad_block_rows(int64_t rows);  // rows of the temporary one block needs (all rows if not blocked)
// slot += dy^T x for w [out, in] = slot's shape; dy [..., out], x [..., in]; slot in any float dtype.
// zeroed: the slot's values are not a gradient yet (zeros or stale): the product is written into
// it whole, not added (Note [gradients written in place]). row0: slot holds rows [row0, row0 +
// slot.size(0)) of the weight's gradient (Note [gradient blocks] makes a range at a time).
void add_linear_weight_grad(Tensor& slot, const Tensor& dy, const Tensor& x, bool zeroed = false, int64_t row0 = 0);
// Backward of y = gelu(h), h = linear(x, w, b) the saved pre-activation (forward: linear, then gelu):
// gelu_bias_backward's dh and db, then linear_backward's two products on dh (db undefined unless has_bias);
// dh_out, if given, receives dh (for a weight gradient made later from it).
LinearGrads linear_gelu_backward(const Tensor& dy, const Tensor& x, const Tensor& w, const Tensor& h, bool need_dx,
                                 bool has_bias, bool need_dw = true, Tensor* dh_out = nullptr, Gelu form = Gelu::tanh);
// Number of cached oneDNN matmul primitives (steady state adds none; tests check this).
size_t matmul_cache_size();
// Whether this CPU has a oneDNN kernel for products in dt. Where a 16-bit dtype has none, its
// products widen to f32 and round once (the fallback); tests can force that path.
bool matmul_native(DType dt);
void set_matmul_lowp_fallback_for_testing(bool force);
int64_t matmul_fallback_count();  // 16-bit products computed through the fallback so far

// Note [16-bit products]: 16-bit matmuls and convolutions either run oneDNN's bf16/f16 kernels
// (native) or widen to f32, run the f32 kernel and round once (f32: Note [low-precision
// fallback]); both give the same result up to summation order. Which is faster depends on the
// processor (AMX: native; AVX512-BF16 alone: often f32), so a run picks one before step 1
// (zero::choose_products) and keeps it. The test hooks above and below share this switch.
enum class Products { native, f32 };
void set_lowp_products(Products p);  // matmuls and convolutions, process-wide
Products lowp_products();
const char* products_name(Products p);  // "native" | "f32"
bool cpu_has_amx();                     // oneDNN's effective ISA includes AMX

// Note [processor cap] (ops/cpu/isa.cpp): ONEDNN_MAX_CPU_ISA caps oneDNN and zerotrain's own
// vector code alike; read once. A value oneDNN does not know (which it ignores) is a config error
// naming the choices, from check_cpu_isa (the command line asks before any work).
struct CpuIsa {
  std::string name;  // oneDNN's effective ISA: "avx512_core_bf16", "avx2", ...
  std::string cap;   // ONEDNN_MAX_CPU_ISA as given (upper case), or empty
  bool avx2 = false, f16c = false, avx512 = false;  // what the own vector code may use
  std::string cap_error;                            // the cap oneDNN does not know, said
};
const CpuIsa& cpu_isa();
void check_cpu_isa();
// The f16 conversions' vector paths this processor may run under the cap (scalar first), and a
// test hook that pins one (nullopt: the best again).
enum class F16Path { scalar, f16c, avx512 };
std::vector<F16Path> f16_paths();
void force_f16_path_for_testing(std::optional<F16Path> p);
// Seconds for one Linear's products (forward x[m,k] @ w[n,k]^T and both backward products) in dt
// with the native kernels, and in f32 on f32 operands, on one thread: the best of `reps` (more for
// small products, 50 ms of them) after a warm-up. Restores the switch and the thread count.
struct ProductTimes {
  double native_s = 0, f32_s = 0;
};
ProductTimes time_lowp_products(DType dt, int64_t m, int64_t k, int64_t n, int reps);

// ---- elementwise (numpy broadcasting for binary ops) ----
Shape broadcast_shape(const Shape& a, const Shape& b);  // throws "[broadcast] ..." if incompatible
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
// Backward of add/sub/mul: gradients reduced back to each input's (broadcast) shape.
BinaryGrads add_backward(const Tensor& dy, const Shape& a, const Shape& b, bool need_a, bool need_b);
BinaryGrads sub_backward(const Tensor& dy, const Shape& a, const Shape& b, bool need_a, bool need_b);
// a is read only when need_b and b only when need_a (the other may be undefined).
BinaryGrads mul_backward(const Tensor& dy, const Tensor& a, const Tensor& b, const Shape& a_shape, const Shape& b_shape,
                         bool need_a, bool need_b);
Tensor scale(const Tensor& a, float s);
Tensor add_scalar(const Tensor& a, float s);
Tensor sum_to(const Tensor& g, const Shape& shape);  // sums broadcast dims of g back to `shape`
// dst += src, dst += alpha*src in place: same shape, dst contiguous, dtypes may differ (any
// float pair; computed in f32, rounded once to dst's dtype).
void add_(Tensor& dst, const Tensor& src);
void axpy_(Tensor& dst, float alpha, const Tensor& src);

Tensor relu(const Tensor& x);
Tensor relu_backward(const Tensor& dy, const Tensor& x);
Tensor gelu(const Tensor& x, Gelu form = Gelu::tanh);
Tensor gelu_backward(const Tensor& dy, const Tensor& x, Gelu form = Gelu::tanh);
Tensor tanh(const Tensor& x);
Tensor tanh_backward(const Tensor& dy, const Tensor& x);  // from the input x
// Rows per block of gelu_bias_backward's bias sums: a fixed partition, so db does not depend on
// the thread count (blocks are summed in block order).
inline constexpr int64_t kBiasGradBlockRows = 64;
struct GeluBiasGrads {
  Tensor dh, db;  // dh: h's shape; db: [h.size(-1)]; both in h's dtype
};
// One pass over h [..., C] (the input of a gelu that follows a bias): dh = dy * gelu'(h), the same
// values as gelu_backward, and db = sum of dh over the rows, accumulated in f32 before rounding.
GeluBiasGrads gelu_bias_backward(const Tensor& dy, const Tensor& h, Gelu form = Gelu::tanh);

// ---- reductions ----
Tensor sum(const Tensor& x);  // all elements -> shape []
Tensor sum(const Tensor& x, int64_t dim, bool keepdim);
Tensor mean(const Tensor& x);  // -> shape []
Tensor mean(const Tensor& x, int64_t dim, bool keepdim);
// Backward of the reductions above: dy (one element, or the reduced shape) spread over in_shape.
Tensor sum_backward(const Tensor& dy, const Shape& in_shape, DType dt);
Tensor mean_backward(const Tensor& dy, const Shape& in_shape, DType dt);
Tensor sum_backward(const Tensor& dy, const Shape& in_shape, int64_t dim, bool keepdim);
Tensor mean_backward(const Tensor& dy, const Shape& in_shape, int64_t dim, bool keepdim);
// Backward of sum/mean over `dim`: expands dy (reduced shape) back to `in_shape`.
Tensor expand_reduced(const Tensor& dy, const Shape& in_shape, int64_t dim, bool keepdim, float factor);

// ---- softmax family (over the last dimension; computed in f32, output in x's dtype) ----
Tensor softmax(const Tensor& x);
Tensor softmax_backward(const Tensor& dy, const Tensor& y);  // y = softmax output
Tensor log_softmax(const Tensor& x);
Tensor log_softmax_backward(const Tensor& dy, const Tensor& y);  // y = log_softmax output

// Fused log-softmax + negative log-likelihood, mean over targets != ignore_index.
// logits [N, C] float, targets [N] i32. Returns loss (shape []) and keeps what backward needs:
// the logits, or with `with_grad` the gradient itself, written in the same pass (Note [one-pass
// classifier] in src/ops/softmax.cpp).
struct CrossEntropyResult {
  Tensor loss;        // shape [], f32
  Tensor logits;      // [N, C] as given (contiguous), saved for backward; empty with a grad
  Tensor lse;         // [N] f32 log-sum-exp per row (Note [fused cross-entropy])
  int64_t count = 0;  // targets counted (not ignored)
  Tensor grad;        // with_grad: dloss/dlogits for dloss = 1, the logits' dtype
};
CrossEntropyResult cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index = -100,
                                 bool with_grad = false);
// dlogits = dloss * (softmax - onehot) / count, zero rows for ignored targets; dtype of logits.
Tensor cross_entropy_backward(float dloss, const CrossEntropyResult& saved, const Tensor& targets,
                              int64_t ignore_index);

// ---- metrics ----
Tensor argmax(const Tensor& x);                                      // over last dim -> i32
int64_t count_correct(const Tensor& logits, const Tensor& targets);  // argmax == target

}  // namespace zt::ops
