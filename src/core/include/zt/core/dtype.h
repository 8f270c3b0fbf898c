#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

namespace zt {

enum class DType : uint8_t { f32, bf16, f16, i32, i64 };

size_t dtype_size(DType t);
const char* dtype_name(DType t);
DType dtype_from_name(const std::string& name);  // throws zt::Error naming the valid ones
bool is_floating(DType t);

// bfloat16 stored as raw bits; conversion rounds to nearest even (as PyTorch does).
struct bf16 {
  uint16_t bits = 0;
};

// IEEE binary16 stored as raw bits; conversion rounds to nearest even, overflow gives inf.
struct f16 {
  uint16_t bits = 0;
};

// Kernels that convert inside vectorised loops need these inlined (gcc stops inlining in
// large units, and an out-of-line call keeps a loop scalar).
#define ZT_ALWAYS_INLINE inline __attribute__((always_inline))

ZT_ALWAYS_INLINE float bf16_to_float(bf16 v) {
  uint32_t u = uint32_t(v.bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Round to nearest even; NaN stays a quiet NaN. Both results computed and one selected (as
// Note [branch-free f16]): with a branch, a loop storing its results to memory ran scalar.
ZT_ALWAYS_INLINE bf16 float_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  return bf16{uint16_t((u & 0x7fffffffu) > 0x7f800000u ? (u >> 16) | 0x40u : rounded)};
}

// Note [branch-free f16]: every class (normal, subnormal, inf/NaN) is computed and the result
// selected, so loops over these conversions vectorise; checked bit for bit against the
// compiler's _Float16 (tests/core/tensor_test.cpp).
ZT_ALWAYS_INLINE float f16_to_float(f16 v) {
  uint32_t u;
  float f;
  const uint32_t h = v.bits, em = (h & 0x7fffu) << 13, exp = em & 0x0f800000u;
  const uint32_t normal = em + (uint32_t(127 - 15) << 23);
  const uint32_t special = normal + (uint32_t(128 - 16) << 23);  // inf, NaN
  uint32_t a = em + (113u << 23), b = 113u << 23;                // zero, subnormal: exact float arithmetic
  float fa, fb;
  std::memcpy(&fa, &a, 4);
  std::memcpy(&fb, &b, 4);
  const float sub_f = fa - fb;
  uint32_t sub;
  std::memcpy(&sub, &sub_f, 4);
  u = (exp == 0x0f800000u ? special : exp == 0 ? sub : normal) | ((h & 0x8000u) << 16);
  std::memcpy(&f, &u, 4);
  return f;
}

ZT_ALWAYS_INLINE f16 float_to_f16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
  const uint32_t nan = 0x7e00u | ((ax >> 13) & 0x3ffu);
  float a;
  std::memcpy(&a, &ax, 4);
  const float shifted = a + 0.5f;  // a half subnormal's ulp (2^-24) lands on the float ulp
  uint32_t sub;
  std::memcpy(&sub, &shifted, 4);
  sub -= 0x3f000000u;
  const uint32_t normal = (ax + 0xc8000fffu + ((ax >> 13) & 1u)) >> 13;  // rebias, round to nearest even
  const uint32_t o = ax > 0x7f800000u ? nan : ax >= 0x477ff000u ? 0x7c00u : ax < 0x38800000u ? sub : normal;
  return f16{uint16_t(sign | o)};
}

namespace detail {
// T's place among Ts, or -1.
template <typename T, typename... Ts>
consteval int index_among() {
  int i = 0;
  const bool found = ((std::is_same_v<T, Ts> || (++i, false)) || ...);
  return found ? i : -1;
}
// The type each DType stores, in DType's order.
template <typename T>
inline constexpr int stored_index = index_among<T, float, bf16, f16, int32_t, int64_t>();
}  // namespace detail

// The DType whose elements are stored as T (what Tensor::data<T>() checks against).
template <typename T>
requires(detail::stored_index<std::remove_const_t<T>> >=
         0) constexpr DType dtype_of = DType(detail::stored_index<std::remove_const_t<T>>);

}  // namespace zt
