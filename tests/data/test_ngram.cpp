// The n-gram baselines on corpora small enough to compute by hand (Note [n-gram baseline]).
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "zt/core/error.h"
#include "zt/data/ngram.h"

namespace zt::data {
namespace {

using std::log;
using Tokens = std::vector<uint16_t>;

Tokens alternating(int pairs) {  // 0 1 0 1 ...
  Tokens t;
  for (int i = 0; i < 2 * pairs; ++i) t.push_back(uint16_t(i % 2));
  return t;
}

TEST(Ngram, UnigramIsAddOneOverAllTrainTokens) {
  // counts over 0 0 1 with V = 3: (2+1)/6, (1+1)/6, (0+1)/6.
  const NgramBaseline r = ngram_baseline({0, 0, 1}, {0, 2}, 3);
  EXPECT_DOUBLE_EQ(r.unigram_loss, -(log(3.0 / 6) + log(1.0 / 6)) / 2);
  EXPECT_EQ(r.train_tokens, 3);
  EXPECT_EQ(r.val_tokens, 2);
  EXPECT_EQ(r.heldout_tokens, 1);
}

TEST(Ngram, AddKChangesTheSmoothing) {
  NgramOptions o;
  o.add_k = 0.5;  // (2.5, 1.5, 0.5) / 4.5
  const NgramBaseline r = ngram_baseline({0, 0, 1}, {0, 2}, 3, o);
  EXPECT_DOUBLE_EQ(r.unigram_loss, -(log(2.5 / 4.5) + log(0.5 / 4.5)) / 2);
}

TEST(Ngram, SeenHeldOutBigramsPushLambdaToTheTopOfTheGrid) {
  // Fit 0 1 0 1 0 1 0 1 0, held out: the 1 after 0, P_bigram = 1, so the loss falls with λ.
  const Tokens train = alternating(5);
  const NgramBaseline r = ngram_baseline(train, {1, 0, 2, 0}, 3);
  EXPECT_DOUBLE_EQ(r.lambda, 0.99);
  // All 10 train tokens: unigram 6/13, 6/13, 1/13; bigrams (0,1) x5, (1,0) x4.
  const double l = 0.99, u0 = 6.0 / 13, u1 = 6.0 / 13, u2 = 1.0 / 13;
  EXPECT_DOUBLE_EQ(r.unigram_loss, -(log(u1) + log(u0) + log(u2) + log(u0)) / 4);
  // 1: first token, unigram; 0 after 1: 4/4; 2 after 0: 0/5; 0 after 2: 2 starts no bigram, unigram.
  EXPECT_NEAR(r.bigram_loss, -(log(u1) + log(l + (1 - l) * u0) + log((1 - l) * u2) + log(u0)) / 4, 1e-12);
}

TEST(Ngram, UnseenHeldOutBigramsMakeLambdaZeroAndTheBigramTheUnigram) {
  Tokens train = alternating(5);
  train.back() = 2;  // held out: 2 after 0, never seen in the fit
  const NgramBaseline r = ngram_baseline(train, {1, 0, 2, 0, 1}, 3);
  EXPECT_EQ(r.lambda, 0.0);
  EXPECT_DOUBLE_EQ(r.bigram_loss, r.unigram_loss);
}

TEST(Ngram, AFlatHeldOutLossKeepsTheSmallestLambda) {
  // Held out: 2 after 1, and 1 starts no bigram in the fit 0 0 0 1: every λ scores the same.
  const NgramBaseline r = ngram_baseline({0, 0, 0, 1, 2}, {1, 2}, 3);
  EXPECT_EQ(r.lambda, 0.0);
  EXPECT_DOUBLE_EQ(r.bigram_loss, r.unigram_loss);
}

TEST(Ngram, LambdaInsideTheGridMinimisesTheHeldOutLoss) {
  // Fit (0 1) x9; held out: 0 after 1 (P_bigram 1, P_uni 10/21) and 2 after 0 (0, 1/21).
  // -[log(λ + (1-λ)·10/21) + log((1-λ)/21)] is least at λ = 1/22 ≈ 0.045; on the grid, 0.05.
  Tokens train = alternating(9);
  train.insert(train.end(), {0, 2});
  const NgramBaseline r = ngram_baseline(train, {0, 1, 2}, 3);
  EXPECT_EQ(r.heldout_tokens, 2);
  EXPECT_DOUBLE_EQ(r.lambda, 0.05);
  // All 20: unigram (10, 9, 1) + 1 over 23; bigrams (0,1) x9, (0,2) x1, (1,0) x9.
  const double l = 0.05, u0 = 11.0 / 23, u1 = 10.0 / 23, u2 = 2.0 / 23;
  EXPECT_DOUBLE_EQ(r.unigram_loss, -(log(u0) + log(u1) + log(u2)) / 3);
  // 0: first, unigram; 1 after 0: 9/10; 2 after 1: 0/9.
  EXPECT_NEAR(r.bigram_loss, -(log(u0) + log(l * 0.9 + (1 - l) * u1) + log((1 - l) * u2)) / 3, 1e-12);
}

TEST(Ngram, TheHeldOutSliceIsTheFractionOfTrainTokensAtLeastOne) {
  NgramOptions o;
  o.heldout_fraction = 0.25;
  EXPECT_EQ(ngram_baseline(alternating(10), {0}, 2, o).heldout_tokens, 5);
  EXPECT_EQ(ngram_baseline(alternating(1), {0}, 2, o).heldout_tokens, 1);  // 2 tokens: 0.5, but at least 1
  o.heldout_fraction = 0.9;
  EXPECT_EQ(ngram_baseline(alternating(5), {0}, 2, o).heldout_tokens, 9);  // leaves 1 to count
}

TEST(Ngram, TheFullGpt2VocabularyNeedsNoSquareTable) {
  // V = 50257 with the largest ids: a V x V table of counts would be 20 GB.
  const Tokens train = {50256, 50255, 50256, 50255, 50256, 50255, 50256, 50255, 50256, 50255};
  const NgramBaseline r = ngram_baseline(train, {50256, 50255}, 50257);
  const double u = 6.0 / (10 + 50257);
  EXPECT_DOUBLE_EQ(r.unigram_loss, -log(u));
  EXPECT_DOUBLE_EQ(r.lambda, 0.99);
  EXPECT_NEAR(r.bigram_loss, -(log(u) + log(0.99 * 1 + 0.01 * u)) / 2, 1e-12);  // 50255 after 50256: 5/5
}

TEST(Ngram, SameInputSameNumbers) {
  Tokens train, val;
  uint32_t x = 12345;
  for (int i = 0; i < 5000; ++i) {
    x = x * 1103515245u + 12345u;
    (i < 4000 ? train : val).push_back(uint16_t((x >> 16) % 300));
  }
  const NgramBaseline a = ngram_baseline(train, val, 300), b = ngram_baseline(train, val, 300);
  EXPECT_EQ(a.unigram_loss, b.unigram_loss);
  EXPECT_EQ(a.bigram_loss, b.bigram_loss);
  EXPECT_EQ(a.lambda, b.lambda);
  EXPECT_NEAR(a.unigram_loss, log(300.0), 0.1);  // uniform tokens: about log V
}

// Note [n-gram baseline] written out plainly with std::map, for a corpus whose bigram table
// outgrows the counter's first capacity many times over.
TEST(Ngram, MatchesAPlainReferenceOnARandomCorpus) {
  Tokens train, val;
  uint32_t x = 7;
  for (int i = 0; i < 6000; ++i) {
    x = x * 1103515245u + 12345u;
    const auto t = uint16_t((x >> 16) % 97 + (i % 3 == 0 ? 0 : 100));  // some structure
    (i < 5000 ? train : val).push_back(t);
  }
  const int64_t V = 200;
  auto counts = [&](int64_t n) {
    std::map<std::pair<int, int>, double> pair;
    std::map<int, double> uni, ctx;
    for (int64_t i = 0; i < n; ++i) {
      uni[train[size_t(i)]] += 1;
      if (i > 0) ctx[train[size_t(i) - 1]] += 1, pair[{train[size_t(i) - 1], train[size_t(i)]}] += 1;
    }
    return std::tuple{pair, uni, ctx, double(n)};
  };
  auto loss = [&](const auto& c, const Tokens& t, size_t begin, double lambda, bool first_has_context) {
    auto [pair, uni, ctx, n] = c;
    double sum = 0;
    for (size_t i = begin; i < t.size(); ++i) {
      const double pu = (uni[t[i]] + 1) / (n + double(V));
      const bool has = (i > begin || first_has_context) && ctx[t[i - 1]] > 0;
      sum -= log(has ? lambda * pair[{t[i - 1], t[i]}] / ctx[t[i - 1]] + (1 - lambda) * pu : pu);
    }
    return sum / double(t.size() - begin);
  };
  const auto fit = counts(4500);
  double best = INFINITY, lambda = 0;
  for (int k = 0; k < 100; ++k)
    if (const double l = loss(fit, train, 4500, k / 100.0, true); l < best) best = l, lambda = k / 100.0;
  const auto all = counts(5000);
  const NgramBaseline r = ngram_baseline(train, val, V);
  EXPECT_DOUBLE_EQ(r.lambda, lambda);
  EXPECT_GT(r.lambda, 0.0);
  EXPECT_NEAR(r.unigram_loss, loss(all, val, 0, 0.0, false), 1e-12);
  EXPECT_NEAR(r.bigram_loss, loss(all, val, 0, lambda, false), 1e-12);
  EXPECT_LT(r.bigram_loss, r.unigram_loss);
}

std::string error_of(const Tokens& train, const Tokens& val, int64_t V, NgramOptions o = {}) {
  try {
    ngram_baseline(train, val, V, o);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(Ngram, BadInputIsAnErrorSayingWhatAndWhere) {
  EXPECT_NE(error_of({0, 1, 5}, {0}, 3).find("train token 5 at position 2 is not below the vocabulary size 3"),
            std::string::npos);
  EXPECT_NE(error_of({0, 1}, {0, 3}, 3).find("validation token 3 at position 1"), std::string::npos);
  EXPECT_NE(error_of({0}, {0}, 3).find("1 train tokens: at least 2"), std::string::npos);
  EXPECT_NE(error_of({0, 1}, {}, 3).find("no validation tokens"), std::string::npos);
  EXPECT_NE(error_of({0, 1}, {0}, 0).find("vocabulary size"), std::string::npos);
  EXPECT_NE(error_of({0, 1}, {0}, kMaxNgramVocab + 1).find("vocabulary size"), std::string::npos);
  NgramOptions o;
  o.add_k = 0;
  EXPECT_NE(error_of({0, 1}, {0}, 3, o).find("add_k"), std::string::npos);
  o = {};
  o.heldout_fraction = 1;
  EXPECT_NE(error_of({0, 1}, {0}, 3, o).find("heldout_fraction"), std::string::npos);
}

}  // namespace
}  // namespace zt::data
