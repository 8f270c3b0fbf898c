// Unigram and interpolated bigram baselines (Note [n-gram baseline]).
#include "zt/data/ngram.h"

#include <algorithm>
#include <bit>
#include <cmath>

#include "zt/core/error.h"

namespace zt::data {

namespace {

// Bigram counts by key a << 16 | b: open addressing with linear probing (a count of 0 marks an
// empty slot), several times faster than std::unordered_map at millions of distinct pairs.
class PairCounts {
 public:
  explicit PairCounts(size_t expected) { rehash(std::bit_ceil(std::max<size_t>(64, 2 * expected))); }
  void add(uint32_t key) {
    size_t i = slot(key);
    if (counts_[i] == 0) {
      keys_[i] = key;
      if (++size_ * 2 > keys_.size()) {  // keep the load under 1/2
        ++counts_[i];
        rehash(keys_.size() * 2);
        return;
      }
    }
    ++counts_[i];
  }
  int64_t get(uint32_t key) const { return counts_[slot(key)]; }

 private:
  size_t slot(uint32_t key) const {  // key's slot, or the empty one where it would go
    size_t i = size_t((uint64_t(key) * 0x9E3779B97F4A7C15ull) >> shift_);
    while (counts_[i] != 0 && keys_[i] != key) i = (i + 1) & (keys_.size() - 1);
    return i;
  }
  void rehash(size_t capacity) {
    std::vector<uint32_t> keys(capacity);
    std::vector<int64_t> counts(capacity);
    keys.swap(keys_);
    counts.swap(counts_);
    shift_ = 64 - std::countr_zero(capacity);
    for (size_t j = 0; j < keys.size(); ++j) {
      if (counts[j] == 0) continue;
      const size_t i = slot(keys[j]);
      keys_[i] = keys[j];
      counts_[i] = counts[j];
    }
  }
  std::vector<uint32_t> keys_;
  std::vector<int64_t> counts_;
  size_t size_ = 0;
  int shift_ = 0;
};

// Unigram, bigram-context and bigram counts, added to in pieces.
class Counts {
 public:
  Counts(int64_t V, double add_k, size_t expected_pairs)
      : uni_(size_t(V)), ctx_(size_t(V)), pairs_(expected_pairs), V_(V), add_k_(add_k) {}
  // Counts t[begin, end); the token before `begin`, if any, is the first one's context.
  void add(const uint16_t* t, int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      ++uni_[t[i]];
      if (i == 0) continue;
      ++ctx_[t[i - 1]];
      pairs_.add(key(t[i - 1], t[i]));
    }
    n_ += end - begin;
  }
  double p_uni(uint16_t b) const { return (double(uni_[b]) + add_k_) / (double(n_) + add_k_ * double(V_)); }
  bool has_context(uint16_t a) const { return ctx_[a] > 0; }
  double p_bigram(uint16_t a, uint16_t b) const {  // maximum likelihood; needs has_context(a)
    return double(pairs_.get(key(a, b))) / double(ctx_[a]);
  }

 private:
  static uint32_t key(uint16_t a, uint16_t b) { return uint32_t(a) << 16 | b; }
  std::vector<int64_t> uni_, ctx_;
  PairCounts pairs_;
  int64_t n_ = 0, V_;
  double add_k_;
};

// The two probabilities of each scored token: P(b|a)'s ML term (or -1 without a context) and
// P_uni(b). Positions [begin, end) of t; the token before `begin`, if any, is context only.
struct Scored {
  std::vector<double> bigram, unigram;
};
Scored score(const Counts& c, const uint16_t* t, int64_t begin, int64_t end, bool first_has_context) {
  Scored s;
  s.bigram.reserve(size_t(end - begin));
  s.unigram.reserve(size_t(end - begin));
  for (int64_t i = begin; i < end; ++i) {
    const bool ctx = (i > begin || first_has_context) && c.has_context(t[i - 1]);
    s.bigram.push_back(ctx ? c.p_bigram(t[i - 1], t[i]) : -1.0);
    s.unigram.push_back(c.p_uni(t[i]));
  }
  return s;
}

double bigram_loss(const Scored& s, double lambda) {
  double sum = 0;
  for (size_t i = 0; i < s.unigram.size(); ++i)
    sum -= std::log(s.bigram[i] < 0 ? s.unigram[i] : lambda * s.bigram[i] + (1 - lambda) * s.unigram[i]);
  return sum / double(s.unigram.size());
}

void check_tokens(const std::vector<uint16_t>& t, int64_t V, const char* which) {
  for (size_t i = 0; i < t.size(); ++i)
    ZT_CHECK_AS(ErrorKind::data, t[i] < V, "[ngram] ", which, " token ", t[i], " at position ", i,
                " is not below the vocabulary size ", V);
}

}  // namespace

NgramBaseline ngram_baseline(const std::vector<uint16_t>& train, const std::vector<uint16_t>& val, int64_t V,
                             const NgramOptions& opt) {
  ZT_CHECK(V >= 1 && V <= 65536, "[ngram] the vocabulary size must be in [1, 65536] (uint16 tokens), got ", V);
  ZT_CHECK(opt.add_k > 0 && std::isfinite(opt.add_k), "[ngram] add_k must be > 0, got ", opt.add_k);
  ZT_CHECK(opt.heldout_fraction > 0 && opt.heldout_fraction < 1, "[ngram] heldout_fraction must be in (0, 1), got ",
           opt.heldout_fraction);
  ZT_CHECK_AS(ErrorKind::data, train.size() >= 2, "[ngram] ", train.size(),
              " train tokens: at least 2 are needed (one to count, one to choose lambda)");
  ZT_CHECK_AS(ErrorKind::data, !val.empty(), "[ngram] there are no validation tokens to score");
  check_tokens(train, V, "train");
  check_tokens(val, V, "validation");

  NgramBaseline r;
  r.train_tokens = int64_t(train.size());
  r.val_tokens = int64_t(val.size());
  const int64_t n = r.train_tokens;
  r.heldout_tokens = std::min(n - 1, std::max<int64_t>(1, int64_t(double(n) * opt.heldout_fraction)));
  const int64_t fit = n - r.heldout_tokens;
  // Counts of the fit part choose λ; the held-out tail is then added, giving counts of all.
  // Distinct bigrams grow slower than tokens; the counter rehashes when they outgrow this.
  Counts counts(V, opt.add_k, size_t(std::min<int64_t>(n / 4, int64_t(1) << 20)));
  counts.add(train.data(), 0, fit);
  {
    const Scored held = score(counts, train.data(), fit, n, true);
    double best = INFINITY;
    for (int k = 0; k < kNgramLambdaSteps; ++k) {
      const double lambda = k * kNgramLambdaStep, loss = bigram_loss(held, lambda);
      if (loss < best) best = loss, r.lambda = lambda;  // strict: ties keep the smaller λ
    }
  }
  counts.add(train.data(), fit, n);
  const Scored s = score(counts, val.data(), 0, r.val_tokens, false);
  double uni = 0;
  for (double p : s.unigram) uni -= std::log(p);
  r.unigram_loss = uni / double(r.val_tokens);
  r.bigram_loss = bigram_loss(s, r.lambda);
  return r;
}

}  // namespace zt::data
