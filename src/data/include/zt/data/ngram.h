#pragma once
// Count-based baselines a language model must beat: the held-out cross-entropy (nats/token) of
// an add-k unigram model and of a Jelinek-Mercer interpolated bigram model over token ids.
//
// Note [n-gram baseline]: P_uni(b) = (c(b) + k) / (N + k·V), and for a token b after a:
//   P(b|a) = λ·c(a,b)/c(a,·) + (1-λ)·P_uni(b)   (c(a,·): bigrams that start with a),
// or P_uni(b) when a never starts a bigram in the training tokens, and for the first validation
// token (it has no predecessor). λ is picked from kNgramLambdaGrid (ties: the smaller) by the
// loss on the last heldout_fraction of the TRAIN tokens, with counts from the rest; then the
// counts are redone on all train tokens and both models are scored on every validation token.
// The validation tokens never choose anything. Bigram counts live in a hash map (no V×V table).
#include <cstdint>
#include <vector>

#include "zt/data/token_stream.h"

namespace zt::data {

// Largest vocabulary of the baselines: model.vocab_size's cap (uint32 shards, i32 ids; the bigram
// keys pack two ids into 64 bits, the counts per context are a vector of that size).
inline constexpr int64_t kMaxNgramVocab = int64_t(1) << 24;

// λ = 0.00, 0.01, ..., 0.99 (λ = 1 gives unseen bigrams probability 0).
inline constexpr int kNgramLambdaSteps = 100;
inline constexpr double kNgramLambdaStep = 0.01;

struct NgramOptions {
  double add_k = 1.0;             // > 0: unigram smoothing (1 = add-one / Laplace)
  double heldout_fraction = 0.1;  // in (0, 1): the train tokens' tail that chooses λ (at least 1 token)
  // > 0: only the train split's first this many tokens count (a corpus of billions would hold its
  // distinct bigrams and held-out scores in memory); 0: all of them.
  int64_t max_train_tokens = 0;
};

struct NgramBaseline {
  double unigram_loss = 0;  // nats/token on the validation tokens
  double bigram_loss = 0;
  double lambda = 0;           // the chosen bigram weight
  int64_t train_tokens = 0;    // all of them (or the first max_train_tokens) count in the final model
  int64_t val_tokens = 0;      // all of them are scored
  int64_t heldout_tokens = 0;  // the train tokens that chose λ
};

// vocab_size in [1, kMaxNgramVocab]; every token must be below it (else ErrorKind::data naming which
// token and where). At least 2 train tokens and 1 validation token.
NgramBaseline ngram_baseline(const std::vector<uint16_t>& train, const std::vector<uint16_t>& val, int64_t vocab_size,
                             const NgramOptions& opt = {});
// The same over mapped shards, read in sequential passes (TokenStream::scan).
NgramBaseline ngram_baseline(const TokenStream& train, const TokenStream& val, int64_t vocab_size,
                             const NgramOptions& opt = {});

}  // namespace zt::data
