#pragma once
#include <cstdint>
#include <cstring>
#include <string>

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

}  // namespace zt
