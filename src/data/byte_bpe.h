#pragma once
// Byte-level BPE, as GPT-2's encoder.json + vocab.bpe and tokenizer.json's BPE with a ByteLevel
// pre-tokenizer have it: the byte alphabet, the merges of one piece, and the tokenizer over a
// chain of splitting patterns (Note [byte-level BPE]).
#include <array>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "regex_split.h"
#include "zt/data/tokenizer.h"

namespace zt::data::detail {

// bytes_to_unicode: the character that stands for each byte in a byte-level token.
const std::array<char32_t, 256>& byte_chars();
// The raw bytes of a byte-level token (valid UTF-8); false, with the stray character in `bad`,
// if a character is outside the alphabet.
bool byte_level_bytes(std::string_view token, std::string& bytes, char32_t& bad);
// GPT-2's pre-tokenizer pattern ('s|'t|...| ?\p{L}+|...|\s+), as Encoder.js and ByteLevel use it.
const std::string& gpt2_pattern();

// Encoder.js merges every occurrence of the lowest-ranked pair in a round; Hugging Face's BPE (and
// llama3-tokenizer-js) merges the lowest-ranked, leftmost pair one at a time.
enum class MergeOrder { rounds, one_at_a_time };

struct BpeVocab {
  std::vector<std::string> bytes;  // id -> the raw bytes it stands for
  std::vector<bool> decode_only;   // ids that encode never gives (added tokens outside the model)
};

struct ByteBpeOptions {
  const char* name = "gpt2";
  std::string who = "[tokenizer] gpt2:";
  MergeOrder order = MergeOrder::rounds;
  bool ignore_merges = false;     // a piece that is itself a token is that token (Llama 3)
  bool add_prefix_space = false;  // ByteLevel's option: a piece not starting with ' ' gets one,
  size_t prefix_level = 0;        // as it enters splits[prefix_level] (or the merges, at splits.size())
  enum class Normal { none, nfc, nfd, nfkc, nfkd } normal = Normal::none;
};

// The ids of the vocabulary and the merges between them; built by a loader, then frozen in a tokenizer.
class BpeModel {
 public:
  explicit BpeModel(BpeVocab vocab);
  BpeModel(BpeModel&&) = default;  // ids_ views the strings, which a move leaves in place
  BpeModel(const BpeModel&) = delete;
  int32_t id_of(std::string_view bytes) const;  // -1 when no token has these bytes
  int missing_byte() const;                     // a byte without a one-byte token, or -1
  // left + right -> merged at `rank` (lower merges first); a repeated pair keeps its last rank.
  void add_merge(int32_t left, int32_t right, int32_t merged, int32_t rank);
  const BpeVocab& vocab() const { return vocab_; }
  // Appends the ids of one piece's bytes (Note [byte-level BPE]).
  void merge(std::string_view piece, MergeOrder order, std::vector<int32_t>& out) const;

 private:
  struct Merge {
    int32_t rank, id;
  };
  BpeVocab vocab_;
  std::unordered_map<std::string_view, int32_t> ids_;  // views into vocab_.bytes
  std::array<int32_t, 256> byte_id_{};
  std::unordered_map<uint64_t, Merge> merges_;  // (left id, right id) -> rank and merged id
};

// The tokenizer: `splits` cut the text in turn (each piece of one into the next's pieces), then
// each piece is merged. special() answers "<|...|>" tokens of the vocabulary.
std::unique_ptr<Tokenizer> make_byte_bpe(BpeModel model, std::vector<RegexSplit> splits, ByteBpeOptions opt);

}  // namespace zt::data::detail
