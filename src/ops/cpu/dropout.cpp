// CPU dropout. Note [dropout mask]: element i is kept when 32 bits of a counter-based hash of
// (seed, i) are >= p * 2^32; one splitmix64 finaliser output gives the bits of elements 2j
// (low half) and 2j+1 (high half). The mask depends only on seed and index, never on threads
// or dtype, so backward and an activation-checkpoint recompute regenerate it.
#include <algorithm>
#include <cstdint>

#include "common.h"
#include "kernels.h"
#include "zt/core/splitmix.h"

namespace zt::ops::cpu {

using detail::dispatch_float;

namespace {

constexpr uint64_t kGolden = kSplitmixGolden;
static_assert(kGrain % 2 == 0 && kBlock % 2 == 0, "chunks and blocks must start on a pair");


// The multipliers of elements [b, b + n) (b even): 0 where dropped, scale where kept.
inline void mask_block(uint64_t key, uint64_t thr, float scale, int64_t b, int64_t n, float* __restrict m) {
  const int64_t pairs = (n + 1) / 2;
  for (int64_t j = 0; j < pairs; ++j) {
    const uint64_t h = mix64((uint64_t(b / 2 + j) * kGolden) ^ key);
    m[2 * j] = (h & 0xffffffffull) >= thr ? scale : 0.f;
    m[2 * j + 1] = (h >> 32) >= thr ? scale : 0.f;
  }
}

}  // namespace

void dropout(const Tensor& x, float p, uint64_t seed, Tensor& out) {
  const int64_t n = x.numel();
  const uint64_t key = mix64(seed + kGolden);
  const uint64_t thr = uint64_t(double(p) * 4294967296.0);  // p < 1: below 2^32
  const float scale = 1.f / (1.f - p);
  dispatch_float(x.dtype(), "dropout", [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.data<T>();
    T* po = out.data<T>();
    // kGrain and kBlock are even, so every block starts on an even index (a whole pair).
    parallel_for(n, kGrain, [&](int64_t i0, int64_t i1) {
      alignas(64) float m[kBlock + 1], xb[kBlock], yb[kBlock];
      for (int64_t b = i0; b < i1; b += kBlock) {
        const int64_t len = std::min(kBlock, i1 - b);
        mask_block(key, thr, scale, b, len, m);
        const float* __restrict xv = as_f32(px + b, xb, len);
        float* __restrict yv = out_f32(po + b, yb);
        for (int64_t i = 0; i < len; ++i) yv[i] = xv[i] * m[i];
        from_f32(yv, po + b, len);
      }
    });
  });
}

}  // namespace zt::ops::cpu
