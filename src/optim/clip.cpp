#include "zt/optim/clip.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "zt/core/parallel.h"

namespace zt::optim {
namespace {

// 32 independent double accumulators: gcc turns them into four vectors of lanes without needing
// -ffast-math (four chains, so the adds' latency does not bound the pass), in a fixed order.
double chunk_sum_of_squares(const float* __restrict g, int64_t n) {
  double acc[32] = {};
  int64_t i = 0;
  for (; i + 32 <= n; i += 32)
    for (int j = 0; j < 32; ++j) acc[j] += double(g[i + j]) * double(g[i + j]);
  for (; i < n; ++i) acc[0] += double(g[i]) * double(g[i]);
  for (int w = 16; w >= 1; w /= 2)
    for (int j = 0; j < w; ++j) acc[j] += acc[j + w];
  return acc[0];
}

void scale_kernel(float* __restrict g, int64_t n, float s) {
  for (int64_t i = 0; i < n; ++i) g[i] = g[i] * s;
}

}  // namespace

double sum_of_squares(const float* g, int64_t n) {
  if (n <= 0) return 0.0;
  const int64_t chunks = (n + kClipGrain - 1) / kClipGrain;
  if (chunks == 1) return chunk_sum_of_squares(g, n);
  std::vector<double> partial(size_t(chunks), 0.0);
  parallel_for(chunks, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      const int64_t b = c * kClipGrain, e = std::min(n, b + kClipGrain);
      partial[size_t(c)] = chunk_sum_of_squares(g + b, e - b);
    }
  });
  double total = 0.0;
  for (double p : partial) total += p;
  return total;
}

float clip_coefficient(double total_norm, double max_norm) {
  if (!(max_norm > 0.0)) return 1.f;
  if (std::isnan(total_norm)) return std::numeric_limits<float>::quiet_NaN();
  const double c = max_norm / (total_norm + 1e-6);
  return c < 1.0 ? float(c) : 1.f;
}

void scale_(float* g, int64_t n, float s) {
  parallel_for(n, kClipGrain, [&](int64_t b, int64_t e) { scale_kernel(g + b, e - b, s); });
}

}  // namespace zt::optim
