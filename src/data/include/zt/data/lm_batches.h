#pragma once
// Language-model batches from a token sequence (mapped token shards, token_stream.h): windows of
// T + 1 tokens give x = the first T and y = the last T (each position's next token).
//
// Window i starts at token i * T, so consecutive windows share one token (x never overlaps, as
// llm.c's loader reads): (n - 1) / T windows cover n tokens. Training draws windows in the order
// of StepSampler (Note [global batch layout] in sampler.h); evaluation reads the first K in order.
#include <cstdint>
#include <string>
#include <vector>

#include "zt/core/tensor.h"
#include "zt/data/sampler.h"
#include "zt/data/token_stream.h"

namespace zt::data {

struct LmBatch {
  Tensor x;  // [b, T] i32 tokens
  Tensor y;  // [b, T] i32 next tokens
};

int64_t lm_window_count(int64_t num_tokens, int64_t seq_len);  // (n - 1) / T, 0 if n < 2
// Rows of the windows `windows` (each in [0, lm_window_count)).
LmBatch lm_batch(const TokenStream& tokens, int64_t seq_len, const std::vector<int64_t>& windows);

// check_token_range (token_stream.h) of tokens in memory that `name` stands for.
void check_token_range(const std::vector<uint16_t>& tokens, int64_t vocab_size, const std::string& name);

// Training batches: the position is the step; any world size with the same global batch sees
// the same rows at each step.
class LmBatches {
 public:
  // `name` stands for the tokens in errors (the shard's path). Fewer than seq_len + 1 tokens is
  // ErrorKind::data; a global batch of more windows than there are is ErrorKind::config.
  LmBatches(TokenStream tokens, int64_t seq_len, const BatchLayout& layout, uint64_t seed, bool shuffle = true,
            const std::string& name = "<tokens>");

  int64_t seq_len() const { return seq_len_; }
  int64_t num_windows() const { return sampler_.size(); }
  int64_t steps_per_epoch() const { return sampler_.steps_per_epoch(); }
  const TokenStream& tokens() const { return tokens_; }
  // Micro-batch m of this rank at `step`: [micro, T] each.
  LmBatch micro_batch(int64_t step, int64_t m) const;
  // The step's whole global batch, [global, T] (tests, and one process without accumulation).
  LmBatch global_batch(int64_t step) const;

 private:
  TokenStream tokens_;
  int64_t seq_len_;
  StepSampler sampler_;
};

// Validation: the first `max_windows` (0: all) windows in order, in batches of `batch` rows;
// the last batch may be shorter. The same on every rank and every run.
class LmEvalWindows {
 public:
  LmEvalWindows(TokenStream tokens, int64_t seq_len, int64_t max_windows = 0, const std::string& name = "<tokens>");

  int64_t size() const { return windows_; }
  int64_t num_batches(int64_t batch) const;
  LmBatch batch(int64_t index, int64_t batch) const;  // windows [index * batch, min(+batch, size()))

 private:
  TokenStream tokens_;
  int64_t seq_len_, windows_;
};

}  // namespace zt::data
