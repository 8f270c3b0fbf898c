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

std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> c, std::array<uint32_t, 2> k) {
  constexpr uint64_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = kM0 * c[0], p1 = kM1 * c[2];
    c = {uint32_t(p1 >> 32) ^ c[1] ^ k[0], uint32_t(p1), uint32_t(p0 >> 32) ^ c[3] ^ k[1], uint32_t(p0)};
    k = {k[0] + kW0, k[1] + kW1};
  }
  return c;
}

namespace {

// Four values per counter, element i from counter i / 4: make(words) fills v[0..4), and only
// the ones inside [begin, end) are kept.
template <typename Make>
void fill_by_fours(uint64_t key, float* out, int64_t begin, int64_t end, Make make) {
  const std::array<uint32_t, 2> k{uint32_t(key), uint32_t(key >> 32)};
  float v[4];
  for (int64_t c = begin / 4; 4 * c < end; ++c) {
    make(philox4x32({uint32_t(c), uint32_t(uint64_t(c) >> 32), 0, 0}, k), v);
    const int64_t lo = std::max(begin, 4 * c), hi = std::min(end, 4 * c + 4);
    for (int64_t i = lo; i < hi; ++i) out[i - begin] = v[i - 4 * c];
  }
}

float unit(uint32_t w) { return float(w >> 8) * (1.f / 16777216.f); }  // [0, 1) with 24 bits, as torch's float draws

}  // namespace

void counter_uniform(uint64_t key, float lo, float hi, float* out, int64_t begin, int64_t end) {
  fill_by_fours(key, out, begin, end, [lo, hi](const std::array<uint32_t, 4>& w, float* v) {
    for (int j = 0; j < 4; ++j) v[j] = lo + (hi - lo) * unit(w[size_t(j)]);
  });
}

void counter_normal(uint64_t key, float mean, float stddev, float* out, int64_t begin, int64_t end) {
  fill_by_fours(key, out, begin, end, [mean, stddev](const std::array<uint32_t, 4>& w, float* v) {
    for (int j = 0; j < 4; j += 2) {  // Box-Muller; 1-u keeps log's argument in (0, 1]
      const float r = stddev * std::sqrt(-2.f * std::log(1.f - unit(w[size_t(j)])));
      float s = 0, c = 0;
      sincosf(6.28318530718f * unit(w[size_t(j) + 1]), &s, &c);
      v[j] = mean + r * c;
      v[j + 1] = mean + r * s;
    }
  });
}

}  // namespace zt
