// Reductions of the shm backend, written as short loops over fp32 blocks that the compiler
// vectorises (-O3): widen each source into an fp32 accumulator, combine, round once, store.
#include "shm_reduce.h"

#include <algorithm>
#include <cstring>

namespace zt::comm::detail {
namespace {

constexpr int64_t kBlock = 1024;  // fp32 accumulator of 4 KiB: stays in L1

struct F32 {
  using T = float;
  static float load(float x) { return x; }
  static float store(float x) { return x; }
};
struct BF16 {
  using T = bf16;
  static float load(bf16 x) { return bf16_to_float(x); }
  static bf16 store(float x) { return float_to_bf16(x); }
};
struct F16 {
  using T = f16;
  static float load(f16 x) { return f16_to_float(x); }
  static f16 store(float x) { return float_to_f16(x); }
};

template <typename E>
void reduce_float(ReduceOp op, const void* const* src, int nsrc, void* out, void* out2, int64_t n) {
  using T = typename E::T;
  alignas(64) float acc[kBlock];
  const float div = float(nsrc);
  for (int64_t i0 = 0; i0 < n; i0 += kBlock) {
    const int64_t len = std::min(kBlock, n - i0);
    const T* s0 = static_cast<const T*>(src[0]) + i0;
    for (int64_t j = 0; j < len; ++j) acc[j] = E::load(s0[j]);
    for (int p = 1; p < nsrc; ++p) {
      const T* s = static_cast<const T*>(src[p]) + i0;
      if (op == ReduceOp::max) {
        for (int64_t j = 0; j < len; ++j) {
          const float v = E::load(s[j]);
          acc[j] = (v != v || v > acc[j]) ? v : acc[j];
        }
      } else {
        for (int64_t j = 0; j < len; ++j) acc[j] += E::load(s[j]);
      }
    }
    if (op == ReduceOp::avg)
      for (int64_t j = 0; j < len; ++j) acc[j] /= div;
    T* o = static_cast<T*>(out) + i0;
    for (int64_t j = 0; j < len; ++j) o[j] = E::store(acc[j]);
    if (out2) std::memcpy(static_cast<T*>(out2) + i0, o, size_t(len) * sizeof(T));
  }
}

// U: the unsigned type of T, so sums wrap as two's complement (as MPI_SUM does) without UB.
template <typename T, typename U>
void reduce_int(ReduceOp op, const void* const* src, int nsrc, void* out, void* out2, int64_t n) {
  T* o = static_cast<T*>(out);
  for (int64_t i = 0; i < n; ++i) {
    T a = static_cast<const T*>(src[0])[i];
    for (int p = 1; p < nsrc; ++p) {
      const T v = static_cast<const T*>(src[p])[i];
      a = op == ReduceOp::max ? std::max(a, v) : T(U(a) + U(v));
    }
    o[i] = a;
  }
  if (out2) std::memcpy(out2, out, size_t(n) * sizeof(T));
}

}  // namespace

void reduce_elems(DType d, ReduceOp op, const void* const* src, int nsrc, void* out, void* out2, int64_t n) {
  switch (d) {
    case DType::f32:
      return reduce_float<F32>(op, src, nsrc, out, out2, n);
    case DType::bf16:
      return reduce_float<BF16>(op, src, nsrc, out, out2, n);
    case DType::f16:
      return reduce_float<F16>(op, src, nsrc, out, out2, n);
    case DType::i32:
      return reduce_int<int32_t, uint32_t>(op, src, nsrc, out, out2, n);
    case DType::i64:
      return reduce_int<int64_t, uint64_t>(op, src, nsrc, out, out2, n);
  }
  ZT_THROW("[comm] shm: no reduction for dtype ", dtype_name(d));
}

}  // namespace zt::comm::detail
