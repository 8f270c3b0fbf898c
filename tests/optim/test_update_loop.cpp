// The update loop's branch-free f16 conversions (Note [branch-free f16]) against core's.
#include <gtest/gtest.h>

#include <cstring>

#include "update_loop.h"

namespace zt::optim::detail {
namespace {

TEST(BranchFreeF16, ReadsEveryHalfAsCoreDoes) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float a = f16_to_float(f16{uint16_t(h)}), b = f16_to_float_vec(f16{uint16_t(h)});
    ASSERT_EQ(bits_of(a), bits_of(b)) << std::hex << "half 0x" << h;
  }
}

// A sweep of float bit patterns (every class: zero, f16 subnormal, rounding ties, overflow,
// inf, NaN payloads) plus the boundaries; the exhaustive 2^32 check was run once by hand.
TEST(BranchFreeF16, RoundsFloatsAsCoreDoes) {
  auto check = [](uint32_t x) {
    const float f = float_of(x);
    ASSERT_EQ(float_to_f16(f).bits, float_to_f16_vec(f).bits) << std::hex << "float 0x" << x;
  };
  for (uint64_t x = 0; x <= 0xffffffffull; x += 4093) check(uint32_t(x));
  for (uint32_t edge : {0x38800000u, 0x477ff000u, 0x7f800000u, 0x33000000u, 0x33000001u}) {
    for (uint32_t d = 0; d < 64; ++d) check(edge - 32 + d), check((edge - 32 + d) | 0x80000000u);
  }
  for (uint32_t m = 0; m < (1u << 13); ++m) check(0x3f800000u | m);  // every rounding of a mantissa tail
}

}  // namespace
}  // namespace zt::optim::detail
