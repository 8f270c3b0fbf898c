// sample_token: greedy, top-k, the drawn distribution (counted over many draws from a fixed
// seed), determinism, and bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "sampling.h"
#include "zt/core/error.h"

namespace zt::apps {
namespace {

std::vector<float> log_probs(const std::vector<double>& p) {
  std::vector<float> l;
  for (double x : p) l.push_back(float(std::log(x)));
  return l;
}

// Frequencies of each index over n draws.
std::vector<double> frequencies(const std::vector<float>& logits, float t, int64_t k, int n, uint64_t seed) {
  Generator gen(seed);
  std::vector<double> f(logits.size());
  for (int i = 0; i < n; ++i) f[size_t(sample_token(logits.data(), int64_t(logits.size()), t, k, gen))] += 1.0 / n;
  return f;
}

TEST(Sampling, TemperatureZeroIsTheArgmaxAndTiesGoToTheLowerIndex) {
  Generator gen(1);
  const std::vector<float> l = {0.5f, 3.f, -1.f, 3.f, 2.f};
  EXPECT_EQ(sample_token(l.data(), 5, 0.f, 0, gen), 1);
  EXPECT_EQ(sample_token(l.data(), 5, 0.f, 3, gen), 1);
  const std::vector<float> last = {-INFINITY, 0.f, 7.f};
  EXPECT_EQ(sample_token(last.data(), 3, 0.f, 0, gen), 2);
}

TEST(Sampling, TopKOfOneIsTheArgmaxAtAnyTemperatureAndDrawsNothing) {
  Generator gen(7), fresh(7);
  const std::vector<float> l = {0.f, 0.1f, 0.2f, 5.f, 0.3f};
  for (float t : {0.5f, 1.f, 100.f}) EXPECT_EQ(sample_token(l.data(), 5, t, 1, gen), 3);
  EXPECT_EQ(gen.next_u64(), fresh.next_u64());  // the generator did not move
}

TEST(Sampling, DrawsFollowTheSoftmax) {
  const std::vector<double> p = {0.1, 0.2, 0.3, 0.4};
  const std::vector<double> f = frequencies(log_probs(p), 1.f, 0, 40000, 123);
  for (size_t i = 0; i < p.size(); ++i) EXPECT_NEAR(f[i], p[i], 0.01) << "token " << i;  // ~4 sigma
}

TEST(Sampling, TemperatureSharpensTheDistribution) {
  // T = 0.5 squares the probabilities: 0.01, 0.04, 0.09, 0.16 over 0.30.
  const std::vector<double> f = frequencies(log_probs({0.1, 0.2, 0.3, 0.4}), 0.5f, 0, 40000, 5);
  const double want[] = {0.01 / 0.3, 0.04 / 0.3, 0.09 / 0.3, 0.16 / 0.3};
  for (size_t i = 0; i < 4; ++i) EXPECT_NEAR(f[i], want[i], 0.01) << "token " << i;
}

TEST(Sampling, TopKKeepsOnlyTheLargestRenormalised) {
  // k = 2 keeps tokens 3 (0.4) and 1 (0.3): 4/7 and 3/7; tokens 0 and 2 never appear.
  const std::vector<double> f = frequencies(log_probs({0.2, 0.3, 0.1, 0.4}), 1.f, 2, 40000, 9);
  EXPECT_EQ(f[0], 0.0);
  EXPECT_EQ(f[2], 0.0);
  EXPECT_NEAR(f[3], 4.0 / 7, 0.01);
  EXPECT_NEAR(f[1], 3.0 / 7, 0.01);
}

TEST(Sampling, TopKCutBreaksTiesTowardTheLowerIndex) {
  // Three tokens tie for the top two places: 1 and 2 are kept, 4 never drawn.
  const std::vector<double> f = frequencies({0.f, 1.f, 1.f, -2.f, 1.f}, 1.f, 2, 4000, 3);
  EXPECT_GT(f[1], 0.4);
  EXPECT_GT(f[2], 0.4);
  EXPECT_EQ(f[4], 0.0);
}

TEST(Sampling, TopKLargerThanTheVocabularyMeansAll) {
  const std::vector<float> l = log_probs({0.1, 0.2, 0.3, 0.4});
  EXPECT_EQ(frequencies(l, 1.f, 4, 2000, 11), frequencies(l, 1.f, 0, 2000, 11));
  EXPECT_EQ(frequencies(l, 1.f, 1000, 2000, 11), frequencies(l, 1.f, 0, 2000, 11));
}

TEST(Sampling, OneUniformDrawPicksByTheInverseCdf) {
  const std::vector<double> p = {0.1, 0.2, 0.3, 0.4};
  const std::vector<float> l = log_probs(p);
  for (uint64_t seed = 0; seed < 50; ++seed) {
    Generator gen(seed), copy(seed);
    const double u = copy.uniform01();
    int want = 0;
    double acc = p[0];
    for (; u >= acc && want < 3; acc += p[size_t(++want)]) {
    }
    if (std::abs(u - acc) < 1e-5 || (want > 0 && std::abs(u - (acc - p[size_t(want)])) < 1e-5)) continue;  // rounding
    EXPECT_EQ(sample_token(l.data(), 4, 1.f, 0, gen), want) << "u = " << u;
    EXPECT_EQ(gen.next_u64(), copy.next_u64()) << "exactly one draw";
  }
}

TEST(Sampling, MinusInfinityIsNeverDrawn) {
  const std::vector<double> f = frequencies({-INFINITY, 0.f, -INFINITY, 0.f}, 1.f, 0, 2000, 4);
  EXPECT_EQ(f[0] + f[2], 0.0);
}

TEST(Sampling, SameSeedSameTokensAndAnotherSeedOthers) {
  const std::vector<float> l = {0.f, 0.5f, 1.f, 1.5f, 2.f, 0.2f, 0.7f, 1.1f};
  auto draws = [&](uint64_t seed) {
    Generator gen(seed);
    std::vector<int32_t> out;
    for (int i = 0; i < 64; ++i) out.push_back(sample_token(l.data(), 8, 1.f, 5, gen));
    return out;
  };
  EXPECT_EQ(draws(42), draws(42));
  EXPECT_NE(draws(42), draws(43));
}

TEST(Sampling, BadInputThrowsNamingIt) {
  Generator gen(0);
  const std::vector<float> ok = {0.f, 1.f};
  auto message = [&](const std::vector<float>& l, int64_t v, float t, int64_t k) -> std::string {
    try {
      sample_token(l.data(), v, t, k, gen);
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::invalid_argument);
      return e.what();
    }
    return "no error";
  };
  EXPECT_NE(message(ok, 2, -1.f, 0).find("temperature"), std::string::npos);
  EXPECT_NE(message(ok, 2, NAN, 0).find("temperature"), std::string::npos);
  EXPECT_NE(message(ok, 2, 1.f, -3).find("top_k"), std::string::npos);
  EXPECT_NE(message(ok, 0, 1.f, 0).find("vocabulary size"), std::string::npos);
  EXPECT_NE(message({0.f, NAN}, 2, 1.f, 0).find("logit 1 is nan"), std::string::npos);
  EXPECT_NE(message({INFINITY, 0.f}, 2, 0.f, 0).find("logit 0 is inf"), std::string::npos);
  EXPECT_NE(message({-INFINITY, -INFINITY}, 2, 1.f, 0).find("every logit is -inf"), std::string::npos);
}

TEST(Streaming, AnIncompleteUtf8CharacterAtTheEndWaits) {
  EXPECT_EQ(complete_utf8_prefix(""), 0u);
  EXPECT_EQ(complete_utf8_prefix("abc"), 3u);
  EXPECT_EQ(complete_utf8_prefix("a\xC3"), 1u);          // é's first byte
  EXPECT_EQ(complete_utf8_prefix("a\xC3\xA9"), 3u);      // é
  EXPECT_EQ(complete_utf8_prefix("x\xE2\x82"), 1u);      // two of €'s three bytes
  EXPECT_EQ(complete_utf8_prefix("x\xE2\x82\xAC"), 4u);  // €
  EXPECT_EQ(complete_utf8_prefix("\xF0\x9F\x98"), 0u);   // three of an emoji's four
  EXPECT_EQ(complete_utf8_prefix("\xF0\x9F\x98\x80"), 4u);
  // Bytes that no further byte can complete are printed as they are.
  EXPECT_EQ(complete_utf8_prefix("a\x80"), 2u);
  EXPECT_EQ(complete_utf8_prefix("\x80\x80\x80\x80"), 4u);
  EXPECT_EQ(complete_utf8_prefix("\xC3\xA9\xA9"), 3u);
}

}  // namespace
}  // namespace zt::apps
