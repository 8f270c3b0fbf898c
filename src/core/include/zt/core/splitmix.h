#pragma once
// splitmix64 (Steele, Lea and Flood), written once: seeds and counters mixed into unrelated
// 64-bit values, the same on every platform (std's distributions are not specified). The CUDA
// dropout kernel repeats mix64 in device code (ops/cuda/transformer.cu) and must stay equal.
#include <cstdint>

namespace zt {

inline constexpr uint64_t kSplitmixGolden = 0x9E3779B97F4A7C15ull;

// The finaliser: a bijection whose outputs pass BigCrush for counter inputs.
constexpr uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// One step of the generator from state `x`: the finaliser of x + the golden ratio.
constexpr uint64_t splitmix64(uint64_t x) { return mix64(x + kSplitmixGolden); }

}  // namespace zt
