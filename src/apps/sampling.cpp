#include "sampling.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "zt/core/error.h"

namespace zt::apps {

namespace {
int32_t argmax(const float* logits, int64_t V) {
  int64_t best = 0;
  for (int64_t i = 1; i < V; ++i)
    if (logits[i] > logits[best]) best = i;
  return int32_t(best);
}
}  // namespace

int32_t sample_token(const float* logits, int64_t V, float temperature, int64_t top_k, Generator& gen) {
  ZT_CHECK(V >= 1 && V <= INT32_MAX, "[sample] the vocabulary size must be in [1, 2^31), got ", V);
  ZT_CHECK(std::isfinite(temperature) && temperature >= 0, "[sample] temperature must be a finite number >= 0, got ",
           temperature);
  ZT_CHECK(top_k >= 0, "[sample] top_k must be >= 0 (0 = all tokens), got ", top_k);
  for (int64_t i = 0; i < V; ++i)
    ZT_CHECK(!std::isnan(logits[i]) && logits[i] != INFINITY, "[sample] logit ", i, " is ", logits[i],
             " (the model's output is not finite)");
  if (temperature == 0 || top_k == 1) return argmax(logits, V);

  // Candidates in descending logit order, ties to the lower index; top_k keeps a prefix.
  const int64_t k = top_k == 0 || top_k > V ? V : top_k;
  std::vector<int32_t> idx(static_cast<size_t>(V));
  std::iota(idx.begin(), idx.end(), 0);
  auto before = [logits](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
  if (k < V) {
    std::nth_element(idx.begin(), idx.begin() + k, idx.end(), before);
    idx.resize(size_t(k));
    std::sort(idx.begin(), idx.end(), before);
  }
  float top = -INFINITY;
  for (int32_t i : idx) top = std::max(top, logits[i]);
  ZT_CHECK(top != -INFINITY, "[sample] every logit is -inf");
  // Softmax in double, shifted by the maximum so the largest term is exp(0) = 1.
  std::vector<double> w(idx.size());
  double total = 0;
  for (size_t i = 0; i < idx.size(); ++i)
    total += w[i] = std::exp((double(logits[idx[i]]) - double(top)) / temperature);
  const double u = gen.uniform01() * total;
  double acc = 0;
  for (size_t i = 0; i < idx.size(); ++i) {
    acc += w[i];
    if (u < acc) return idx[i];
  }
  // Rounding left u at the very top: the last candidate with a non-zero weight.
  for (size_t i = idx.size(); i-- > 0;)
    if (w[i] > 0) return idx[i];
  return idx[0];
}

size_t complete_utf8_prefix(std::string_view text) {
  size_t i = text.size();
  int cont = 0;  // continuation bytes (10xxxxxx) at the end, at most 3
  while (i > 0 && cont < 3 && (uint8_t(text[i - 1]) & 0xC0) == 0x80) --i, ++cont;
  if (i == 0) return text.size();
  const auto lead = uint8_t(text[i - 1]);
  const int need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
  return need > cont + 1 ? i - 1 : text.size();
}

}  // namespace zt::apps
