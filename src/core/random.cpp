#include "zt/core/random.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace zt {

float Generator::normal(float mean, float stddev) {
  // Box-Muller; 1-u keeps the log argument in (0, 1].
  double u1 = 1.0 - uniform01(), u2 = uniform01();
  return float(mean + stddev * std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2));
}

std::vector<int64_t> Generator::permutation(int64_t n) {
  std::vector<int64_t> p(static_cast<size_t>(n));
  std::iota(p.begin(), p.end(), 0);
  for (int64_t i = n - 1; i > 0; --i) std::swap(p[size_t(i)], p[size_t(below(uint64_t(i) + 1))]);
  return p;
}

}  // namespace zt
