#pragma once
// PCRE2 patterns that cut text into pieces: GPT-2's pre-tokenizer and tokenizer.json's Split
// (Note [\s as JavaScript's]).
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "zt/core/error.h"

namespace zt::data::detail {

// `pattern` with \s (and \S outside a character class) spelled as JavaScript's white space.
std::string js_space_pattern(const std::string& pattern);

class RegexSplit {
 public:
  // Compiles `pattern` (UTF, UCP, after js_space_pattern); a bad one is a `kind` error naming `who`.
  RegexSplit(const std::string& pattern, std::string who, ErrorKind kind);
  ~RegexSplit();
  RegexSplit(RegexSplit&&) noexcept;
  RegexSplit& operator=(RegexSplit&&) noexcept;

  // Appends the pieces of `text` (valid UTF-8): every non-empty match and every gap between matches
  // (Hugging Face's Split with behavior Isolated), in order; empty matches are skipped as JS does.
  void split(std::string_view text, std::vector<std::string_view>& out) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace zt::data::detail
