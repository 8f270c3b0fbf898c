#pragma once
// A stand-in Tokenizer for tests: one id per byte. "gpt2"-like: byte b -> b, <|endoftext|> = 256.
// "bert"-like: [PAD]=0 [UNK]=1 [CLS]=2 [SEP]=3 [MASK]=4, byte b -> 5 + b. A byte 0xFF in the text
// is "invalid" (an error naming its offset), as a real tokenizer refuses bad UTF-8.
#include <string>
#include <string_view>
#include <vector>

#include "zt/core/error.h"
#include "zt/data/tokenizer.h"

namespace zt::data::testing {

class ByteTokenizer : public Tokenizer {
 public:
  explicit ByteTokenizer(bool bert = false) : bert_(bert) {}
  const char* name() const override { return bert_ ? "bert" : "gpt2"; }
  std::vector<int32_t> encode(std::string_view text) const override {
    std::vector<int32_t> ids;
    for (size_t i = 0; i < text.size(); ++i) {
      const uint8_t b = uint8_t(text[i]);
      ZT_CHECK_AS(ErrorKind::data, b != 0xFF, "[fake] invalid byte at offset ", i);
      ids.push_back(int32_t(b) + (bert_ ? 5 : 0));
    }
    return ids;
  }
  std::string decode(const std::vector<int32_t>& ids) const override {
    std::string s;
    for (int32_t id : ids) {
      if (bert_ && id < 5)
        s += std::string(kBertSpecial[id]);
      else if (!bert_ && id == 256)
        s += "<|endoftext|>";
      else
        s.push_back(char(id - (bert_ ? 5 : 0)));
    }
    return s;
  }
  int32_t vocab_size() const override { return bert_ ? 261 : 257; }
  int32_t special(std::string_view token) const override {
    if (!bert_) return token == "<|endoftext|>" ? 256 : -1;
    for (int32_t i = 0; i < 5; ++i)
      if (token == kBertSpecial[i]) return i;
    return -1;
  }

 private:
  static constexpr const char* kBertSpecial[5] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
  bool bert_;
};

}  // namespace zt::data::testing
