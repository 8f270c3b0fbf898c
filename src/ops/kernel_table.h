#pragma once
// Note [kernel table]: as ggml's backends, each device type has one table of kernels (function
// pointers), filled by its backend's files: cpu/table.cpp always, cuda/table.cpp when CUDA is
// compiled in, else no_cuda_table.cpp, whose lookup says "CUDA is not available in this build".
// A contract (src/ops/*.cpp) validates, allocates its outputs on the inputs' device and calls
// the kernel of that device's table; a kernel a backend lacks is a null entry, which
// ops::supports() reports and the contract turns into one clear error (no silent fallback).
// Kernels receive validated, contiguous (matmul: possibly transposed) inputs and allocated
// outputs, all on the table's device, and only compute.
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernel_types.h"
#include "zt/core/tensor.h"
#include "zt/ops/update.h"

namespace zt::ops::detail {

// Note [kernel contracts]: what every backend's kernel of a name computes (16-bit floats in f32,
// rounded once on the way out). binary: out has the broadcast shape; unary_backward: relu, gelu,
// gelu_erf, tanh; sum_to sums g's broadcast dimensions into out; gelu_bias_backward: dh = dy *
// gelu'(h) and db = dh summed over rows (h [rows, C] viewed flat), one pass. Reductions view x as
// [outer, r, inner] around the reduced dimension; argmax is over the last one, into i32. The
// softmax family is over the last dimension (out may be f32 for a 16-bit x); cross_entropy_rows:
// per row lse = log(sum(exp(x))) and nll = lse - x[target], 0 where target == ignore_index, and
// where grad is given (not overlapping logits, their dtype) cross_entropy_backward's values too;
// cross_entropy_backward: k * (exp(x - lse) - onehot(target)), zero rows at ignore_index.
// embedding: out [..., C] in weight's dtype, ids checked in range; embedding_backward: out [V, C]
// dense. layer_norm: gamma, beta any float dtype, mean, rstd [rows] f32; its backward's dgamma and
// dbeta have gamma's dtype. Both norms: a residual (x's dtype) makes them normalise x + residual,
// rounded to x's dtype and written to sum; their backward's `accumulate` adds dx to dx's values
// (the residual's gradient), rounded once. attention (shapes as in zt/ops/transformer.h): dout, qkv and out share
// qkv's dtype, dqkv is written whole; attention_path names the kernels a call of that shape runs. rms_norm: rstd [rows] f32; rope: cos, sin [T, D/2] f32, out
// has qkv's shape and dtype. cast and axpy_: same numel, any float dtypes; sum_of_squares_to
// leaves the sum on the device: out (i64 [k], x's device) holds its double's bits at `slot`.
// max_pool2d: k x k windows, stride s, no padding; its backward zeroes dx, then adds dy at each
// window's argmax in f32. conv2d_backward_weights: dw, and db when given. Updates: Note [device
// updates] in zt/ops/update.h; wire formats: Note [block quantization] in zt/ops/compress.h.

// X(name, signature): one entry per kernel; the names are what ops::supports() takes.
#define ZT_KERNELS(X)                                                                                                  \
  X(matmul, void(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor* bias, Tensor& out))       \
  X(binary, void(kern::Binary op, const Tensor& a, const Tensor& b, Tensor& out))                                      \
  X(unary, void(kern::Unary op, float s, const Tensor& x, Tensor& out))                                                \
  X(unary_backward, void(kern::Unary op, const Tensor& dy, const Tensor& x, Tensor& out))                              \
  X(sum_to, void(const Tensor& g, Tensor& out))                                                                        \
  X(gelu_bias_backward, void(const Tensor& dy, const Tensor& h, bool erf, Tensor& dh, Tensor& db))                     \
  X(sum_all, double(const Tensor& x))                                                                                  \
  X(sum_dim, void(const Tensor& x, int64_t outer, int64_t r, int64_t inner, float factor, Tensor& out))                \
  X(expand_reduced, void(const Tensor& dy, int64_t outer, int64_t r, int64_t inner, float factor, Tensor& out))        \
  X(argmax, void(const Tensor& x, Tensor& out))                                                                        \
  X(softmax, void(const Tensor& x, bool log, Tensor& out))                                                             \
  X(softmax_backward, void(const Tensor& dy, const Tensor& y, bool log, Tensor& out))                                  \
  X(cross_entropy_rows, void(const Tensor& logits, const Tensor& targets, int64_t ignore_index, float k, Tensor& lse,  \
                             Tensor& nll, Tensor* grad))                                                               \
  X(cross_entropy_backward,                                                                                            \
    void(const Tensor& logits, const Tensor& lse, const Tensor& targets, int64_t ignore_index, float k, Tensor& out))  \
  X(embedding, void(const Tensor& weight, const Tensor& ids, Tensor& out))                                             \
  X(embedding_backward, void(const Tensor& dy, const Tensor& ids, Tensor& out))                                        \
  X(embedding_backward_add, void(const Tensor& dy, const Tensor& ids, DType grad, Tensor& out))                        \
  X(touched_rows, std::vector<int32_t>(const Tensor& ids, int64_t num_rows))                                           \
  X(layer_norm, void(const Tensor& x, const Tensor* residual, const Tensor& gamma, const Tensor& beta, float eps,      \
                     Tensor* sum, Tensor& y, Tensor& mean, Tensor& rstd))                                              \
  X(layer_norm_backward, void(const Tensor& dy, const Tensor& x, const Tensor& gamma, const Tensor& mean,              \
                              const Tensor& rstd, bool accumulate, Tensor& dx, Tensor& dgamma, Tensor& dbeta))         \
  X(dropout, void(const Tensor& x, float p, uint64_t seed, Tensor& out))                                               \
  X(rms_norm, void(const Tensor& x, const Tensor* residual, const Tensor& gamma, float eps, Tensor* sum, Tensor& y,    \
                   Tensor& rstd))                                                                                      \
  X(rms_norm_backward, void(const Tensor& dy, const Tensor& x, const Tensor& gamma, const Tensor& rstd,                \
                            bool accumulate, Tensor& dx, Tensor& dgamma))                                              \
  X(rope, void(const Tensor& qkv, int64_t n_head, int64_t n_kv_head, const Tensor& cos, const Tensor& sin,            \
               bool inverse, Tensor& out))                                                                             \
  X(swiglu, void(const Tensor& gate_up, Tensor& out))                                                                  \
  X(swiglu_backward, void(const Tensor& dy, const Tensor& gate_up, Tensor& dgate_up))                                  \
  X(attention, void(const Tensor& qkv, int64_t n_head, int64_t n_kv_head, bool causal, const Tensor* key_mask,        \
                    Tensor& out, Tensor& lse))                                                                         \
  X(attention_backward, void(const Tensor& dout, const Tensor& qkv, const Tensor& out, const Tensor& lse,              \
                             int64_t n_head, int64_t n_kv_head, bool causal, const Tensor* key_mask, Tensor& dqkv))    \
  X(attention_path, std::string(DType dt, int64_t n_head, int64_t n_kv_head, int64_t head_size, bool key_mask))     \
  X(cast, void(const Tensor& src, Tensor& dst))                                                                        \
  X(scale_, void(Tensor & x, float s))                                                                                 \
  X(axpy_, void(Tensor & dst, float alpha, const Tensor& src))                                                         \
  X(sum_of_squares, double(const Tensor& x))                                                                           \
  X(sum_of_squares_to, void(const Tensor& x, Tensor& out, int64_t slot))                                               \
  X(has_nonfinite, bool(const Tensor& x))                                                                              \
  X(conv2d, void(const Tensor& x, const Tensor& w, const Tensor* b, const kern::ConvGeometry& g, Tensor& y))           \
  X(conv2d_backward_data, void(const Tensor& dy, const Tensor& w, const kern::ConvGeometry& g, Tensor& dx))            \
  X(conv2d_backward_weights,                                                                                           \
    void(const Tensor& dy, const Tensor& x, const kern::ConvGeometry& g, Tensor& dw, Tensor* db))                      \
  X(max_pool2d, void(const Tensor& x, int64_t k, int64_t s, Tensor& y, Tensor& argmax))                                \
  X(max_pool2d_backward, void(const Tensor& dy, const Tensor& argmax, Tensor& dx))                                     \
  X(adam_update, void(const AdamStep& s, const DeviceUpdate& u))                                                       \
  X(sgd_update, void(const SgdStep& s, const DeviceUpdate& u))                                                         \
  X(quantize_blocks, void(const Tensor& x, int bits, Tensor& packet))                                                  \
  X(dequantize_blocks, void(const Tensor& packet, int bits, bool accumulate, Tensor& out))                             \
  X(average_rows, void(const Tensor& ids, const Tensor& rows, int64_t offset, int64_t V, int64_t C, int64_t dst_begin, \
                       float divisor, Tensor& out))                                                                    \
  X(add_average_rows, void(const Tensor& ids, const Tensor& rows, int64_t offset, int64_t V, int64_t C,                \
                           int64_t dst_begin, float divisor, DType wire, Tensor& dst))

// Declares a kernel with the table's signature: ZT_KERNELS(ZT_DECLARE_KERNEL) in a backend's
// kernels.h declares every kernel of the table in its namespace.
#define ZT_DECLARE_KERNEL(name, sig) std::type_identity_t<sig> name;

struct KernelTable {
  const char* backend;  // "cpu", "cuda", "sim"
#define ZT_KERNEL_FIELD(name, sig) std::add_pointer_t<sig> name = nullptr;
  ZT_KERNELS(ZT_KERNEL_FIELD)
#undef ZT_KERNEL_FIELD
};

// The table of every kernel that namespace `ns` defines by ZT_KERNELS' names: cpu/ and cuda/'s.
#define ZT_TABLE_OF(backend, ns)    \
  [] {                              \
    namespace backend_kernels = ns; \
    KernelTable k{backend};         \
    ZT_KERNELS(ZT_TABLE_ENTRY)      \
    return k;                       \
  }()
#define ZT_TABLE_ENTRY(name, sig) k.name = &backend_kernels::name;

const KernelTable& cpu_table();
// The CUDA table, or nullptr in a build without CUDA (no_cuda_table.cpp).
const KernelTable* cuda_table();
// The simulated device's table (sim/table.cpp, always built): the CPU's kernels on its stream.
const KernelTable& sim_table();
// The meta device's table (meta/table.cpp, always built): kernels that do nothing (Note [meta device]).
const KernelTable& meta_table();

// The table of `d`'s backend; throws ErrorKind::invalid_argument "[op] CUDA is not available in
// this build" (or "device cuda:1 is not available") naming the op that asked.
const KernelTable& table_for(Device d, const char* op);

[[noreturn]] void throw_unsupported(const KernelTable& t, Device d, const char* kernel, const char* op);

// Every tensor argument of a kernel call must be on the call's device ("[op] tensors are on
// different devices: cuda:0 and cpu"); other arguments pass.
void check_on(Device d, const Tensor& t, const char* op);
inline void check_arg(Device d, const char* op, const Tensor& t) { check_on(d, t, op); }
inline void check_arg(Device d, const char* op, const Tensor* t) {
  if (t != nullptr) check_on(d, *t, op);
}
inline void check_arg(Device d, const char* op, Tensor* t) { check_arg(d, op, static_cast<const Tensor*>(t)); }
template <typename T>
void check_arg(Device, const char*, const T&) {}

// Runs the kernel `Field` of d's table on args (after checking that every tensor is on d), or
// throws one clear error when that backend lacks it.
template <auto Field, typename... Args>
decltype(auto) run(Device d, const char* kernel_name, const char* op, Args&&... args) {
  const KernelTable& t = table_for(d, op);
  auto f = t.*Field;
  if (f == nullptr) throw_unsupported(t, d, kernel_name, op);
  (check_arg(d, op, args), ...);
  return f(std::forward<Args>(args)...);
}
// ZT_RUN(kernel, op name, device, kernel arguments...)
#define ZT_RUN(name, op, device, ...) \
  ::zt::ops::detail::run<&::zt::ops::detail::KernelTable::name>(device, #name, op, __VA_ARGS__)

}  // namespace zt::ops::detail
