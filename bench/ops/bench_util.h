#pragma once
// What the kernel benchmarks share: a timing loop and seeded uniform inputs.
#include <chrono>
#include <cstdint>
#include <vector>

#include "zt/core/random.h"
#include "zt/core/tensor.h"

namespace zt::bench {

// Seconds per call of f: one warm-up call (primitive creation, first touch, allocator cache),
// then calls until at least min_seconds and min_calls have passed.
template <typename F>
double seconds_per_call(F f, double min_seconds = 1.0, int min_calls = 1) {
  f();
  int calls = 0;
  const auto t0 = std::chrono::steady_clock::now();
  double sec = 0;
  while (sec < min_seconds || calls < min_calls) {
    f();
    ++calls;
    sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  return sec / calls;
}

// Milliseconds per call, over at least 0.5 s and 3 calls.
template <typename F>
double ms_per_call(F f) {
  return 1e3 * seconds_per_call(f, 0.5, 3);
}

inline Tensor uniform(const Shape& s, DType dt, uint64_t seed = 1) {
  Generator g(seed);
  std::vector<float> v(static_cast<size_t>(shape_numel(s)));
  for (auto& x : v) x = g.uniform(-1, 1);
  return Tensor::from_vector(v, s, dt);
}

}  // namespace zt::bench
