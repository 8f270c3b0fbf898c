#pragma once
// Deterministic random numbers from a seed (mt19937_64 with our own distributions, so the
// same seed gives the same numbers on every platform and standard library).
#include <array>
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

// Note [counter init]: Philox4x32-10 (Salmon et al., SC'11) turns a key and a counter into four
// 32-bit words, so element i of a stream is computed without drawing the elements before it:
// initial weights then depend only on the seed, the parameter and i, and any rank or thread
// fills any range. Random123's known-answer vectors check it (tests/core/random_test.cpp).
std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> counter, std::array<uint32_t, 2> key);
// Elements [begin, end) of stream `key` into out[0, end - begin). Values come in blocks of 64 from
// 16 counters, value 64 b + 16 j + l from word j of counter 16 b + l (so vector lanes write
// contiguous values): U(lo, hi) from 24 bits of the word; N(mean, stddev) by Box-Muller, the
// radius from word 0 (2) and the angle from word 1 (3) giving the cosine at j = 0 (2), the sine at 1 (3).
constexpr int kBlockCounters = 16, kBlockValues = 4 * kBlockCounters;
void counter_uniform(uint64_t key, float lo, float hi, float* out, int64_t begin, int64_t end);
void counter_normal(uint64_t key, float mean, float stddev, float* out, int64_t begin, int64_t end);

}  // namespace zt
