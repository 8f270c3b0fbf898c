#pragma once
// The tests' tiny GPT-2, one definition for every suite: 2 blocks, 2 heads, 16 positions; each
// suite picks its vocabulary, width and seed (its trajectories were recorded with them).
#include <cstdint>

#include "zt/nn/transformer.h"

namespace zt::testing_util {

inline nn::TransformerConfig tiny_gpt(int64_t vocab = 37, int64_t n_embd = 16, uint64_t seed = 3) {
  nn::TransformerConfig c;
  c.vocab_size = vocab;
  c.block_size = 16;
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = n_embd;
  c.seed = seed;
  return c;
}

}  // namespace zt::testing_util
