#pragma once
// Gradient-clipping helpers over flat fp32 buffers (the norm is all-reduced by the caller).
#include <cstdint>

namespace zt::optim {

// Sum of g[i]^2 accumulated in double. Fixed chunking (kClipGrain) and fixed-order partial
// sums, so the result does not depend on the number of threads.
double sum_of_squares(const float* g, int64_t n);

// torch.nn.utils.clip_grad_norm_'s factor: min(1, max_norm / (total_norm + 1e-6)); 1 if
// max_norm <= 0 (clipping disabled). NaN total_norm gives NaN, as torch does.
float clip_coefficient(double total_norm, double max_norm);

// g[i] *= s.
void scale_(float* g, int64_t n, float s);

constexpr int64_t kClipGrain = int64_t(1) << 14;

}  // namespace zt::optim
