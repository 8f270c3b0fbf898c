#pragma once
// Deterministic random numbers from a seed (mt19937_64 with our own distributions, so the
// same seed gives the same numbers on every platform and standard library).
#include <cstdint>
#include <random>
#include <vector>

namespace zt {

class Generator {
 public:
  explicit Generator(uint64_t seed = 0) : eng_(seed) {}
  uint64_t next_u64() { return eng_(); }
  double uniform01() { return double(eng_() >> 11) * (1.0 / 9007199254740992.0); }  // [0,1)
  float uniform(float lo, float hi) { return float(lo + (hi - lo) * uniform01()); }
  float normal(float mean, float stddev);
  uint64_t below(uint64_t n) { return n ? next_u64() % n : 0; }  // bias is < 2^-40 for our n
  std::vector<int64_t> permutation(int64_t n);                   // Fisher-Yates

 private:
  std::mt19937_64 eng_;
};

}  // namespace zt
