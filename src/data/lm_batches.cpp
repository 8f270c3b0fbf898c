// Language-model windows and batches (lm_batches.h).
#include "zt/data/lm_batches.h"

#include <algorithm>
#include <numeric>

#include "zt/core/error.h"

namespace zt::data {
namespace {

int64_t checked_windows(const TokenStream& tokens, int64_t seq_len, const std::string& name) {
  ZT_CHECK(seq_len >= 1, "[data] seq_len must be >= 1, got ", seq_len);
  const int64_t n = int64_t(tokens.size());
  ZT_CHECK_AS(ErrorKind::data, n >= seq_len + 1, "[data] ", name, " has ", n, " tokens, fewer than one window of ",
              seq_len + 1, " (seq_len ", seq_len, " + 1)");
  return lm_window_count(n, seq_len);
}

}  // namespace

int64_t lm_window_count(int64_t num_tokens, int64_t seq_len) {
  ZT_CHECK(seq_len >= 1, "[data] seq_len must be >= 1, got ", seq_len);
  return num_tokens < 2 ? 0 : (num_tokens - 1) / seq_len;
}

LmBatch lm_batch(const TokenStream& tokens, int64_t seq_len, const std::vector<int64_t>& windows) {
  const int64_t b = int64_t(windows.size()), count = lm_window_count(tokens.size(), seq_len);
  LmBatch out{Tensor::empty({b, seq_len}, DType::i32), Tensor::empty({b, seq_len}, DType::i32)};
  int32_t* x = out.x.data<int32_t>();
  int32_t* y = out.y.data<int32_t>();
  for (int64_t r = 0; r < b; ++r) {
    const int64_t w = windows[size_t(r)];
    ZT_CHECK(0 <= w && w < count, "[data] window ", w, " is outside the ", count, " windows of ", seq_len + 1,
             " tokens");
    tokens.copy(w * seq_len, seq_len, x + r * seq_len);
    tokens.copy(w * seq_len + 1, seq_len, y + r * seq_len);
  }
  return out;
}

void check_token_range(const std::vector<uint16_t>& tokens, int64_t vocab_size, const std::string& name) {
  check_token_range(TokenStream(tokens, name), vocab_size);
}

LmBatches::LmBatches(TokenStream tokens, int64_t seq_len, const BatchLayout& layout, uint64_t seed, bool shuffle,
                     const std::string& name)
    : tokens_(std::move(tokens)),
      seq_len_(seq_len),
      sampler_(checked_windows(tokens_, seq_len, name), layout, seed, shuffle,
               "windows of " + std::to_string(seq_len + 1) + " tokens in " + name) {}

LmBatch LmBatches::micro_batch(int64_t step, int64_t m) const {
  return lm_batch(tokens_, seq_len_, sampler_.micro_batch(step, m));
}

LmBatch LmBatches::global_batch(int64_t step) const { return lm_batch(tokens_, seq_len_, sampler_.global_batch(step)); }

LmEvalWindows::LmEvalWindows(TokenStream tokens, int64_t seq_len, int64_t max_windows, const std::string& name)
    : tokens_(std::move(tokens)), seq_len_(seq_len) {
  ZT_CHECK(max_windows >= 0, "[data] max_windows must be >= 0, got ", max_windows);
  const int64_t all = checked_windows(tokens_, seq_len, name);
  windows_ = max_windows > 0 ? std::min(all, max_windows) : all;
}

int64_t LmEvalWindows::num_batches(int64_t batch) const {
  ZT_CHECK(batch >= 1, "[data] eval batch must be >= 1, got ", batch);
  return (windows_ + batch - 1) / batch;
}

LmBatch LmEvalWindows::batch(int64_t index, int64_t batch) const {
  ZT_CHECK(0 <= index && index < num_batches(batch), "[data] eval batch ", index, " is outside 0..",
           num_batches(batch) - 1);
  const int64_t begin = index * batch, end = std::min(windows_, begin + batch);
  std::vector<int64_t> windows(size_t(end - begin));
  std::iota(windows.begin(), windows.end(), begin);
  return lm_batch(tokens_, seq_len_, windows);
}

}  // namespace zt::data
