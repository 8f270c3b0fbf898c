// Unigram and interpolated bigram baselines (Note [n-gram baseline]).
#include "zt/data/ngram.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "zt/core/error.h"

namespace zt::data {

namespace {

// Counts from tokens [0, n): unigrams, bigram contexts and bigrams (key a << 16 | b).
class Counts {
 public:
  Counts(const uint16_t* t, int64_t n, int64_t V, double add_k)
      : uni_(size_t(V)), ctx_(size_t(V)), denom_(double(n) + add_k * double(V)), add_k_(add_k) {
    pairs_.reserve(size_t(std::min<int64_t>(n, int64_t(1) << 24)));
    for (int64_t i = 0; i < n; ++i) {
      ++uni_[t[i]];
      if (i == 0) continue;
      ++ctx_[t[i - 1]];
      ++pairs_[key(t[i - 1], t[i])];
    }
  }
  double p_uni(uint16_t b) const { return (double(uni_[b]) + add_k_) / denom_; }
  bool has_context(uint16_t a) const { return ctx_[a] > 0; }
  double p_bigram(uint16_t a, uint16_t b) const {  // maximum likelihood; needs has_context(a)
    const auto it = pairs_.find(key(a, b));
    return it == pairs_.end() ? 0.0 : double(it->second) / double(ctx_[a]);
  }

 private:
  static uint32_t key(uint16_t a, uint16_t b) { return uint32_t(a) << 16 | b; }
  std::vector<int64_t> uni_, ctx_;
  std::unordered_map<uint32_t, int64_t> pairs_;
  double denom_, add_k_;
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
  {
    const Scored held = score(Counts(train.data(), fit, V, opt.add_k), train.data(), fit, n, true);
    double best = INFINITY;
    for (int k = 0; k < kNgramLambdaSteps; ++k) {
      const double lambda = k * kNgramLambdaStep, loss = bigram_loss(held, lambda);
      if (loss < best) best = loss, r.lambda = lambda;  // strict: ties keep the smaller λ
    }
  }
  const Scored s = score(Counts(train.data(), n, V, opt.add_k), val.data(), 0, r.val_tokens, false);
  double uni = 0;
  for (double p : s.unigram) uni -= std::log(p);
  r.unigram_loss = uni / double(r.val_tokens);
  r.bigram_loss = bigram_loss(s, r.lambda);
  return r;
}

}  // namespace zt::data
