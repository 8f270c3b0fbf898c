// tokenizer.json's rules on vocabularies made here (merge order, ignore_merges, added tokens,
// Split, normalizers, WordPiece's options), one clear error per malformed file, and the specs
// load_tokenizer_spec takes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "common/error_of.h"
#include "common/temp_dir.h"
#include "tokenizer_test_util.h"
#include "zt/core/error.h"
#include "zt/data/tokenizer.h"

namespace zt::data {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using testing_util::error_kind_of;
using testing_util::error_of;
using Ids = std::vector<int32_t>;

// bytes_to_unicode's character for byte b, as UTF-8.
std::string byte_char(int b) {
  int next = 256, cp = 0;
  for (int x = 0; x <= b; ++x) {
    const bool printable = (x >= '!' && x <= '~') || (x >= 0xA1 && x <= 0xAC) || (x >= 0xAE && x <= 0xFF);
    cp = printable ? x : next++;
  }
  std::string s;
  if (cp < 0x80) return s += char(cp);
  s += char(0xC0 | (cp >> 6));
  s += char(0x80 | (cp & 0x3F));
  return s;
}

// A byte-level BPE: the 256 byte tokens (id = byte), "ab" = 256, "aba" = 257, "xy" = 258 (no merge
// makes it), <|x|> = 259 added. Its merges put "ab a" before "a b", which tells Hugging Face's one
// merge at a time from Encoder.js's rounds.
json tiny_bpe() {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[byte_char(b)] = b;
  vocab["ab"] = 256;
  vocab["aba"] = 257;
  vocab["xy"] = 258;
  return {{"added_tokens", {{{"id", 259}, {"content", "<|x|>"}, {"special", true}}}},
          {"normalizer", nullptr},
          {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
          {"decoder", {{"type", "ByteLevel"}}},
          {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", {"ab a", "a b"}}}}};
}

json tiny_wordpiece() {
  json vocab = json::object();
  const std::vector<std::string> t = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "un", "##aff", "##able", "a", "##a", ","};
  for (size_t i = 0; i < t.size(); ++i) vocab[t[i]] = i;
  return {{"added_tokens", {{{"id", 3}, {"content", "[SEP]"}}, {{"id", 10}, {"content", "<extra>"}}}},
          {"normalizer", {{"type", "BertNormalizer"}, {"lowercase", true}}},
          {"pre_tokenizer", {{"type", "BertPreTokenizer"}}},
          {"model", {{"type", "WordPiece"}, {"unk_token", "[UNK]"}, {"vocab", vocab}}}};
}

class TokenizerJsonRules : public testing_util::TempDirTest {
 protected:
  std::unique_ptr<Tokenizer> load(const json& j) { return load_tokenizer_json(write("tokenizer.json", j.dump())); }
  std::string error(const json& j) {
    return error_of([&] { load(j); });
  }
};

TEST_F(TokenizerJsonRules, MergesOneAtATimeAsHuggingFace) {
  const auto tok = load(tiny_bpe());
  EXPECT_EQ(tok->vocab_size(), 260);
  EXPECT_EQ(tok->encode("abab"), (Ids{257, 'b'}));  // Encoder.js's rounds: {256, 256}
  EXPECT_EQ(tok->encode("aba"), (Ids{257}));
  EXPECT_EQ(tok->encode("xy"), (Ids{'x', 'y'}));
  EXPECT_EQ(tok->decode({257, 'b', 259}), "abab<|x|>");
}

TEST_F(TokenizerJsonRules, IgnoreMergesTakesAPieceThatIsAToken) {
  json j = tiny_bpe();
  j["model"]["ignore_merges"] = true;
  EXPECT_EQ(load(j)->encode("xy xy"), (Ids{258, ' ', 'x', 'y'}));  // " xy" is no token: merged
}

TEST_F(TokenizerJsonRules, AddedTokensComeFirstLongestAndStripTheirSides) {
  json j = tiny_bpe();
  EXPECT_EQ(load(j)->encode("a<|x|>b"), (Ids{'a', 259, 'b'}));
  EXPECT_EQ(load(j)->special("<|x|>"), 259);
  j["added_tokens"].push_back({{"id", 260}, {"content", "<|x|>y"}, {"lstrip", true}, {"rstrip", true}});
  EXPECT_EQ(load(j)->encode("a <|x|>y  b<|x|>"), (Ids{'a', 260, 'b', 259}));
}

TEST_F(TokenizerJsonRules, SplitStagesKeepTheGapsAndByteLevelCanAddASpace) {
  json j = tiny_bpe();
  j["pre_tokenizer"] = {{"type", "Sequence"},
                        {"pretokenizers",
                         {{{"type", "Split"}, {"pattern", {{"Regex", "b"}}}, {"behavior", "Isolated"}},
                          {{"type", "ByteLevel"}, {"use_regex", false}, {"add_prefix_space", false}}}}};
  EXPECT_EQ(load(j)->encode("aba ab"), (Ids{'a', 'b', 'a', ' ', 'a', 'b'}));
  j["pre_tokenizer"]["pretokenizers"][0]["pattern"] = {{"String", "."}};  // literally a dot
  EXPECT_EQ(load(j)->encode("ab.ab"), (Ids{256, '.', 256}));
  j = tiny_bpe();
  j["pre_tokenizer"]["add_prefix_space"] = true;
  EXPECT_EQ(load(j)->encode("ab"), (Ids{' ', 256}));
}

TEST_F(TokenizerJsonRules, NormalizersComposeOrDecompose) {
  json j = tiny_bpe();
  EXPECT_EQ(load(j)->encode("e\u0301"), (Ids{'e', 0xCC, 0x81}));
  j["normalizer"] = {{"type", "NFC"}};
  EXPECT_EQ(load(j)->encode("e\u0301"), (Ids{0xC3, 0xA9}));
  j["normalizer"] = {{"type", "NFKD"}};
  EXPECT_EQ(load(j)->encode("\u00e9"), (Ids{'e', 0xCC, 0x81}));
}

TEST_F(TokenizerJsonRules, WordPieceFollowsItsOptions) {
  json j = tiny_wordpiece();
  auto tok = load(j);
  EXPECT_EQ(tok->vocab_size(), 11);
  EXPECT_EQ(tok->encode("Unaffable, aa[SEP]zz"), (Ids{4, 5, 6, 9, 7, 8, 3, 1}));
  EXPECT_EQ(tok->decode({4, 5, 6, 10}), "unaffable <extra>");
  EXPECT_EQ(tok->encode("<extra>"), (Ids{10}));
  j["normalizer"] = nullptr;
  EXPECT_EQ(load(j)->encode("Unaffable unaffable"), (Ids{1, 4, 5, 6}));
  j["model"]["max_input_chars_per_word"] = 5;
  EXPECT_EQ(load(j)->encode("unaffable aa"), (Ids{1, 7, 8}));
}

TEST_F(TokenizerJsonRules, MalformedFilesAreOneDataErrorNamingTheKey) {
  const auto with = [](json j, const json::json_pointer& at, json v) {
    j[at] = std::move(v);
    return j;
  };
  using P = json::json_pointer;
  json no_vocab = tiny_bpe();
  no_vocab["model"].erase("vocab");
  json hole = tiny_bpe();  // "xy" added again at its id leaves room for a gap at 259
  hole["added_tokens"] = {{{"id", 258}, {"content", "xy"}}, {{"id", 260}, {"content", "<|y|>"}}};
  json deep = json::array();
  for (int i = 0; i < 20; ++i) deep = json::array({deep});
  const std::vector<std::pair<json, std::string>> cases = {
      {json::array(), "the top level: expected an object, got []"},
      {json::object(), "missing key model (expected an object"},
      {with(tiny_bpe(), P("/model/type"), "Unigram"), "model.type: expected \"BPE\" or \"WordPiece\""},
      {no_vocab, "missing key model.vocab"},
      {with(tiny_bpe(), P("/model/vocab/ab"), "x"), "model.vocab \"ab\": expected an integer id, got \"x\""},
      {with(tiny_bpe(), P("/model/vocab/ab"), 9999), "model.vocab \"ab\": expected an id in [0, 260)"},
      {with(tiny_bpe(), P("/model/merges/1"), "a zz"), "model.merges[1]: expected tokens of model.vocab (\"zz\""},
      {with(tiny_bpe(), P("/model/merges/1"), "x z"), "model.merges[1]: expected tokens of model.vocab (\"xz\""},
      {with(tiny_bpe(), P("/model/merges/0"), "abc"), "model.merges[0]: expected \"a b\": two tokens and one space"},
      {with(tiny_bpe(), P("/model/merges/0"), 7), "model.merges[0]: expected \"a b\" or [\"a\", \"b\"], got 7"},
      {with(tiny_bpe(), P("/model/dropout"), 0.1), "model.dropout: expected null"},
      {with(tiny_bpe(), P("/pre_tokenizer/type"), "Metaspace"), "pre_tokenizer.type: expected \"ByteLevel\""},
      {with(
           tiny_bpe(), P("/pre_tokenizer"),
           {{"type", "Sequence"},
            {"pretokenizers",
             {{{"type", "Split"}, {"pattern", {{"Regex", "("}}}, {"behavior", "Isolated"}}, {{"type", "ByteLevel"}}}}}),
       "pre_tokenizer.pretokenizers[0].pattern: cannot compile the pattern at offset 1"},
      {with(tiny_bpe(), P("/pre_tokenizer"),
            {{"type", "Sequence"},
             {"pretokenizers",
              {{{"type", "Split"}, {"pattern", {{"Regex", "b"}}}, {"behavior", "Removed"}}, {{"type", "ByteLevel"}}}}}),
       "pre_tokenizer.pretokenizers[0].behavior: expected \"Isolated\""},
      {with(tiny_bpe(), P("/pre_tokenizer"),
            {{"type", "Sequence"}, {"pretokenizers", {{{"type", "ByteLevel"}}, {{"type", "ByteLevel"}}}}}),
       "pre_tokenizer.pretokenizers[1]: expected nothing after the ByteLevel pre-tokenizer"},
      {with(tiny_bpe(), P("/normalizer"), {{"type", "Lowercase"}}), "normalizer.type: expected null, \"NFC\""},
      {with(tiny_bpe(), P("/decoder/type"), "Metaspace"), "decoder.type: expected \"ByteLevel\""},
      {with(tiny_bpe(), P("/added_tokens/0/single_word"), true), "added_tokens[0].single_word: expected false"},
      {with(tiny_bpe(), P("/added_tokens/0/id"), -3), "added_tokens[0].id: expected an integer in [0, "},
      {hole, "no token (in model.vocab or added_tokens) has id 259"},
      {with(tiny_bpe(), P("/model/vocab/ab c"), 260), "model.vocab \"ab c\": expected byte-level characters only"},
      {with(tiny_wordpiece(), P("/model/unk_token"), "<unk>"), "no <unk> entry"},
      {with(tiny_wordpiece(), P("/normalizer/type"), "NFC"), "normalizer.type: expected null or \"BertNormalizer\""},
      {with(tiny_wordpiece(), P("/pre_tokenizer/type"), "Whitespace"),
       "pre_tokenizer.type: expected \"BertPreTokenizer\""},
      {with(tiny_wordpiece(), P("/normalizer/lowercase"), "yes"), "normalizer.lowercase: expected true or false"},
      {with(tiny_bpe(), P("/added_tokens/0/x"), deep), "JSON nested deeper than 16 levels"},
  };
  for (const auto& [j, says] : cases) {
    const std::string e = error(j);
    EXPECT_THAT(e, HasSubstr(path("tokenizer.json") + ": ")) << says;
    EXPECT_THAT(e, HasSubstr(says)) << j.dump().substr(0, 200);
    EXPECT_EQ(error_kind_of([&] { load(j); }), ErrorKind::data) << says;
  }
  json missing_byte = tiny_bpe();
  missing_byte["model"]["vocab"].erase("q");
  missing_byte["model"]["vocab"]["qq"] = 'q';
  EXPECT_THAT(error(missing_byte), HasSubstr("expected a token for every byte (none is \"q\", byte 113)"));
  write("tokenizer.json", "{\"model\": ");
  EXPECT_THAT(error_of([&] { load_tokenizer_json(path("tokenizer.json")); }), HasSubstr("invalid JSON at byte offset"));
  EXPECT_THAT(error_of([&] { load_tokenizer_json(path("nowhere.json")); }),
              HasSubstr("cannot open " + path("nowhere.json")));
}

TEST_F(TokenizerJsonRules, EncodeRejectsInvalidUtf8AndDecodeUnknownIds) {
  const auto tok = load(tiny_bpe());
  EXPECT_THAT(error_of([&] { tok->encode("ab\xff"); }), HasSubstr("byte 0xFF at offset 2"));
  EXPECT_THAT(error_of([&] { tok->decode({1, 260}); }), HasSubstr("id 260 at position 1"));
}

TEST_F(TokenizerJsonRules, SpecsNameTheKindsFilesAndFolders) {
  const std::string root = path("data");
  std::filesystem::create_directories(root + "/mine");
  std::ofstream(root + "/mine/tokenizer.json") << tiny_bpe().dump();
  std::ofstream(root + "/mine/vocab.json") << "[]";  // tokenizer.json comes first
  EXPECT_EQ(resolve_tokenizer_spec("mine", root).kind, "tokenizer.json");
  EXPECT_EQ(resolve_tokenizer_spec(root + "/mine", "elsewhere").path, root + "/mine/tokenizer.json");
  EXPECT_EQ(load_tokenizer_spec(root + "/mine/tokenizer.json", "")->vocab_size(), 260);
  const TokenizerSource gpt2 = resolve_tokenizer_spec("gpt2", root);
  EXPECT_EQ(gpt2.kind, "gpt2");
  EXPECT_EQ(gpt2.files, (std::vector<std::string>{root + "/gpt2/encoder.json", root + "/gpt2/vocab.bpe"}));
  std::filesystem::create_directories(root + "/g");
  std::ofstream(root + "/g/encoder.json") << "{}";
  std::ofstream(root + "/g/vocab.bpe") << "";
  EXPECT_EQ(resolve_tokenizer_spec("g", root).kind, "gpt2");
  std::filesystem::remove(root + "/g/vocab.bpe");
  EXPECT_THAT(error_of([&] { resolve_tokenizer_spec("g", root); }), HasSubstr("holds none of tokenizer.json"));
  std::ofstream(root + "/g/tokenizer.model") << "";
  EXPECT_EQ(resolve_tokenizer_spec(root + "/g", root).kind, "sentencepiece");
  EXPECT_EQ(resolve_tokenizer_spec(root + "/g/tokenizer.model", root).kind, "sentencepiece");
  EXPECT_EQ(error_kind_of([&] { resolve_tokenizer_spec("gpt3", root); }), ErrorKind::invalid_argument);
  EXPECT_THAT(error_of([&] { resolve_tokenizer_spec("gpt3", root); }), HasSubstr("unknown tokenizer 'gpt3'"));
  EXPECT_THAT(error_of([&] { resolve_tokenizer_spec(root + "/no.json", root); }), HasSubstr("cannot open"));
  EXPECT_TRUE(is_tokenizer_spec("bert", root));
  EXPECT_TRUE(is_tokenizer_spec("mine", root));
  EXPECT_FALSE(is_tokenizer_spec("gpt3", root));
}

}  // namespace
}  // namespace zt::data
