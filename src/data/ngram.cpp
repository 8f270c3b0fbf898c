// Unigram and interpolated bigram baselines (Note [n-gram baseline]).
#include "zt/data/ngram.h"

#include <algorithm>
#include <bit>
#include <cmath>

#include "zt/core/error.h"

namespace zt::data {

namespace {

// Bigram counts by key a << 32 | b: open addressing with linear probing (a count of 0 marks an
// empty slot), several times faster than std::unordered_map at millions of distinct pairs.
class PairCounts {
 public:
  explicit PairCounts(size_t expected) { rehash(std::bit_ceil(std::max<size_t>(64, 2 * expected))); }
  void add(uint64_t key) {
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
  int64_t get(uint64_t key) const { return counts_[slot(key)]; }

 private:
  size_t slot(uint64_t key) const {  // key's slot, or the empty one where it would go
    size_t i = size_t((key * 0x9E3779B97F4A7C15ull) >> shift_);
    while (counts_[i] != 0 && keys_[i] != key) i = (i + 1) & (keys_.size() - 1);
    return i;
  }
  void rehash(size_t capacity) {
    std::vector<uint64_t> keys(capacity);
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
  std::vector<uint64_t> keys_;
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
  void add(const TokenStream& t, int64_t begin, int64_t end) {
    bool has_prev = begin > 0;
    uint32_t prev = has_prev ? t.token(begin - 1) : 0;
    t.scan(begin, end, [&](int64_t, const uint32_t* x, int64_t n) {
      for (int64_t i = 0; i < n; ++i) {
        ++uni_[x[i]];
        if (has_prev) {
          ++ctx_[prev];
          pairs_.add(key(prev, x[i]));
        }
        prev = x[i], has_prev = true;
      }
      return true;
    });
    n_ += end - begin;
  }
  double p_uni(uint32_t b) const { return (double(uni_[b]) + add_k_) / (double(n_) + add_k_ * double(V_)); }
  bool has_context(uint32_t a) const { return ctx_[a] > 0; }
  double p_bigram(uint32_t a, uint32_t b) const {  // maximum likelihood; needs has_context(a)
    return double(pairs_.get(key(a, b))) / double(ctx_[a]);
  }

 private:
  static uint64_t key(uint32_t a, uint32_t b) { return uint64_t(a) << 32 | b; }
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
Scored score(const Counts& c, const TokenStream& t, int64_t begin, int64_t end, bool first_has_context) {
  Scored s;
  s.bigram.reserve(size_t(end - begin));
  s.unigram.reserve(size_t(end - begin));
  bool has_prev = first_has_context;
  uint32_t prev = has_prev ? t.token(begin - 1) : 0;
  t.scan(begin, end, [&](int64_t, const uint32_t* x, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      const bool ctx = has_prev && c.has_context(prev);
      s.bigram.push_back(ctx ? c.p_bigram(prev, x[i]) : -1.0);
      s.unigram.push_back(c.p_uni(x[i]));
      prev = x[i], has_prev = true;
    }
    return true;
  });
  return s;
}

double bigram_loss(const Scored& s, double lambda) {
  double sum = 0;
  for (size_t i = 0; i < s.unigram.size(); ++i)
    sum -= std::log(s.bigram[i] < 0 ? s.unigram[i] : lambda * s.bigram[i] + (1 - lambda) * s.unigram[i]);
  return sum / double(s.unigram.size());
}

void check_tokens(const TokenStream& t, int64_t count, int64_t V, const char* which) {
  t.scan(0, count, [&](int64_t first, const uint32_t* x, int64_t n) {
    for (int64_t i = 0; i < n; ++i)
      ZT_CHECK_AS(ErrorKind::data, x[i] < V, "[ngram] ", which, " token ", x[i], " at position ", first + i,
                  " is not below the vocabulary size ", V);
    return true;
  });
}

}  // namespace

NgramBaseline ngram_baseline(const std::vector<uint16_t>& train, const std::vector<uint16_t>& val, int64_t V,
                             const NgramOptions& opt) {
  return ngram_baseline(TokenStream(train), TokenStream(val), V, opt);
}

NgramBaseline ngram_baseline(const TokenStream& train, const TokenStream& val, int64_t V, const NgramOptions& opt) {
  ZT_CHECK(V >= 1 && V <= kMaxNgramVocab, "[ngram] the vocabulary size must be in [1, ", kMaxNgramVocab, "], got ", V);
  ZT_CHECK(opt.add_k > 0 && std::isfinite(opt.add_k), "[ngram] add_k must be > 0, got ", opt.add_k);
  ZT_CHECK(opt.heldout_fraction > 0 && opt.heldout_fraction < 1, "[ngram] heldout_fraction must be in (0, 1), got ",
           opt.heldout_fraction);
  ZT_CHECK_AS(ErrorKind::data, train.size() >= 2, "[ngram] ", train.size(),
              " train tokens: at least 2 are needed (one to count, one to choose lambda)");
  ZT_CHECK_AS(ErrorKind::data, !val.empty(), "[ngram] there are no validation tokens to score");
  NgramBaseline r;
  r.train_tokens = opt.max_train_tokens > 0 ? std::min(train.size(), opt.max_train_tokens) : train.size();
  check_tokens(train, r.train_tokens, V, "train");
  check_tokens(val, val.size(), V, "validation");

  r.val_tokens = int64_t(val.size());
  const int64_t n = r.train_tokens;
  r.heldout_tokens = std::min(n - 1, std::max<int64_t>(1, int64_t(double(n) * opt.heldout_fraction)));
  const int64_t fit = n - r.heldout_tokens;
  // Counts of the fit part choose λ; the held-out tail is then added, giving counts of all.
  // Distinct bigrams grow slower than tokens; the counter rehashes when they outgrow this.
  Counts counts(V, opt.add_k, size_t(std::min<int64_t>(n / 4, int64_t(1) << 20)));
  counts.add(train, 0, fit);
  {
    const Scored held = score(counts, train, fit, n, true);
    double best = INFINITY;
    for (int k = 0; k < kNgramLambdaSteps; ++k) {
      const double lambda = k * kNgramLambdaStep, loss = bigram_loss(held, lambda);
      if (loss < best) best = loss, r.lambda = lambda;  // strict: ties keep the smaller λ
    }
  }
  counts.add(train, fit, n);
  // λ is chosen: the validation tokens are scored in one pass, nothing kept per token.
  double uni = 0, bi = 0;
  bool has_prev = false;
  uint32_t prev = 0;
  val.scan(0, r.val_tokens, [&](int64_t, const uint32_t* x, int64_t m) {
    for (int64_t i = 0; i < m; ++i) {
      const double pu = counts.p_uni(x[i]);
      uni -= std::log(pu);
      bi -= std::log(has_prev && counts.has_context(prev)
                         ? r.lambda * counts.p_bigram(prev, x[i]) + (1 - r.lambda) * pu
                         : pu);
      prev = x[i], has_prev = true;
    }
    return true;
  });
  r.unigram_loss = uni / double(r.val_tokens);
  r.bigram_loss = bi / double(r.val_tokens);
  return r;
}

}  // namespace zt::data
