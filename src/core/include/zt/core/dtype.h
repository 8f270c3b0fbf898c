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

inline float bf16_to_float(bf16 v) {
  uint32_t u = uint32_t(v.bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline bf16 float_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return bf16{uint16_t((u >> 16) | 0x40)};  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return bf16{uint16_t(u >> 16)};
}

// IEEE binary16 stored as raw bits; conversion rounds to nearest even, overflow gives inf.
struct f16 {
  uint16_t bits = 0;
};

inline float f16_to_float(f16 v) {
  const uint32_t h = v.bits, sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  uint32_t u;
  if (exp == 0) {  // zero or subnormal: mant * 2^-24, exact in float
    float f = float(mant) * 5.9604644775390625e-8f;
    std::memcpy(&u, &f, 4);
    u |= sign;
  } else if (exp == 31) {
    u = sign | 0x7f800000u | (mant << 13);
  } else {
    u = sign | ((exp + 112) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline f16 float_to_f16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) return f16{uint16_t(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u | ((ax >> 13) & 0x3ffu) : 0u))};
  if (ax >= 0x477ff000u) return f16{uint16_t(sign | 0x7c00u)};  // >= 65520 rounds to inf
  if (ax < 0x38800000u) {  // half subnormal: adding 0.5 puts the half ulp (2^-24) at the float ulp
    float a;
    std::memcpy(&a, &ax, 4);
    a += 0.5f;
    uint32_t u;
    std::memcpy(&u, &a, 4);
    return f16{uint16_t(sign | (u - 0x3f000000u))};
  }
  const uint32_t odd = (ax >> 13) & 1u;  // rebias the exponent and round to nearest even
  return f16{uint16_t(sign | ((ax + 0xc8000fffu + odd) >> 13))};
}

// The DType whose elements are stored as T (what Tensor::data<T>() checks against).
template <typename T>
struct DTypeOf;
template <> struct DTypeOf<float> { static constexpr DType value = DType::f32; };
template <> struct DTypeOf<bf16> { static constexpr DType value = DType::bf16; };
template <> struct DTypeOf<f16> { static constexpr DType value = DType::f16; };
template <> struct DTypeOf<int32_t> { static constexpr DType value = DType::i32; };
template <> struct DTypeOf<int64_t> { static constexpr DType value = DType::i64; };
template <typename T>
constexpr DType dtype_of = DTypeOf<std::remove_const_t<T>>::value;

}  // namespace zt
