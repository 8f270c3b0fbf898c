// GPT-2's byte-level BPE: the ids of npm gpt-3-encoder's own Encoder.js (run under node) on
// varied text, round trips, the merge rounds on a test-made vocabulary, and errors that name
// the file, the entry or line, or the byte offset.
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

using ::testing::HasSubstr;
using testing_util::error_kind_of;
using testing_util::error_of;
using namespace tok_test;

// Hand-picked cases: contractions (and upper-case ones, which the pattern does not know),
// whitespace runs before words and at the end, every script the pattern's classes touch.
const std::vector<std::string> kCases = {
    "",
    " ",
    "Hello world",
    "Hello  world  ",
    "   leading spaces",
    "trailing spaces   ",
    "tabs\tand\nnewlines\r\n",
    "I'm sure you'll see we've done what's right, they'd say; I'LL SAY IT'S OK",
    "HE'S 'S 's' 'd'",
    "don't  'tis  rock'n'roll",
    "123 4567 89012 3.14159 1,000,000 -42 +7",
    "abc123def 4th 1st",
    "Café naïve résumé coöperate Straße ÉCOLE",
    "日本語のテキスト、句読点。",
    "中文 测试 汉字",
    "한국어 텍스트",
    "Привет, мир! Ελληνικά γράμματα",
    "مرحبا بالعالم שלום עולם",
    "नमस्ते दुनिया ภาษาไทย",
    "emoji 😀👍🏽 family 👨‍👩‍👧 flag 🇫🇷",
    "!!!???...,,,;;;:::",
    "--- ___ *** ### @@@ $$$ %%% ^^^ &&& ((( ))) [[[ ]]] {{{ }}} <<< >>> ||| ~~~ ```",
    "a\u00a0b\u00a0\u00a0c",
    "x\ufeffy \ufeff z",
    "line\u2028separator\u2029paragraph",
    "ideographic\u3000space\u2003em",
    "   \n\n   x",
    " \t \n",
    "\t\t\tindented",
    "e\u0301 combining \u0301 mark",
    "\u200bzero\u200bwidth",
    "\x01\x02\x7f control \u0085",
    "<|endoftext|>",
    "ﬁ ligature ＡＢＣ１２３ fullwidth",
    "Ⅻ roman ½ fraction ² superscript",
    "https://example.com/path?q=1&x=2#frag",
    "for (int i = 0; i < n; ++i) { sum += a[i]; }",
    "supercalifragilisticexpialidocious antidisestablishmentarianism",
    std::string(300, 'a'),
    std::string(70, 'z') + " " + std::string(64, 'q') + " " + std::string(65, 'r'),
    std::string(100, ' ') + "x",
};

// Fragments for the random strings: words in many scripts, contractions, numbers, spacing.
const std::vector<std::string> kParts = {"hello",     "World",    "the",      "GPT",
                                         "tokenizer", "naïve",    "café",     "Straße",
                                         "ÉCOLE",     "über",     "Ünïcödé",  "日本語",
                                         "中文",      "테스트",   "Привет",   "мир",
                                         "Ελληνικά",  "مرحبا",    "שלום",     "नमस्ते",
                                         "ไทย",       "😀",        "👍🏽", "👨‍👩‍👧",
                                         "🇫🇷",        "0",        "42",       "3.14",
                                         "1,000",     "２０２４", "Ⅻ",        "½",
                                         "'s",        "'S",       "'t",       "'re",
                                         "'ve",       "'m",       "'ll",      "'d",
                                         "'LL",       "n't",      "'",        "!",
                                         "?",         "...",      "--",       "—",
                                         "“",         "”",        "«",        "»",
                                         "(",         ")",        "{}",       "<|endoftext|>",
                                         "$",         "%",        "#",        "@",
                                         "\\",        "/",        "_",        "~",
                                         " ",         " ",        " ",        "  ",
                                         "   ",       "\t",       "\n",       "\r\n",
                                         "\n\n",      "\u00a0",   "\u3000",   "\u2003",
                                         "\ufeff",    "\u200b",   "e\u0301",  "\u0301",
                                         "\x01",      "\x7f",     "\u0085",   "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
                                         "Z"};

std::vector<std::string> varied_texts() {
  std::vector<std::string> all = kCases;
  for (std::string& s : random_texts(20240520, 400, 14, kParts)) all.push_back(std::move(s));
  return all;
}

class Gpt2Real : public testing_util::TempDirTest {
 protected:
  static void SetUpTestSuite() {
    if (std::filesystem::exists(data_dir("gpt2") + "/encoder.json")) tok_ = load_gpt2_tokenizer(data_dir("gpt2"));
  }
  static void TearDownTestSuite() { tok_.reset(); }
  void SetUp() override {
    TempDirTest::SetUp();
    if (!tok_) GTEST_SKIP() << data_dir("gpt2") << " not present; run scripts/setup.sh";
  }
  static inline std::unique_ptr<Tokenizer> tok_;
};

TEST_F(Gpt2Real, HasOpenAisVocabularyAndEndOfText) {
  EXPECT_STREQ(tok_->name(), "gpt2");
  EXPECT_EQ(tok_->vocab_size(), 50257);
  EXPECT_EQ(tok_->special("<|endoftext|>"), 50256);
  EXPECT_EQ(tok_->special("<|startoftext|>"), -1);
  EXPECT_EQ(tok_->special("Hello"), -1);
  EXPECT_EQ(tok_->encode("Hello world"), (std::vector<int32_t>{15496, 995}));
  EXPECT_EQ(tok_->encode(""), std::vector<int32_t>{});
}

TEST_F(Gpt2Real, GivesEncoderJsIdsOnVariedText) {
  const std::string why = missing_reference("node", {data_dir("gpt2") + "/Encoder.js"});
  if (!why.empty()) GTEST_SKIP() << why;
  const std::vector<std::string> texts = varied_texts();
  const auto expected = reference_ids("node", "gpt2_js_ids.js", data_dir("gpt2"), texts, path("strings.json"));
  ASSERT_EQ(expected.size(), texts.size());
  int mismatches = 0;
  for (size_t i = 0; i < texts.size() && mismatches < 5; ++i) {
    const auto got = tok_->encode(texts[i]);
    if (got != expected[i]) ++mismatches;
    EXPECT_EQ(got, expected[i]) << "text #" << i << ": " << nlohmann::json(texts[i]).dump();
  }
}

TEST_F(Gpt2Real, DecodeInvertsEncode) {
  for (const std::string& s : varied_texts()) EXPECT_EQ(tok_->decode(tok_->encode(s)), s);
  // Part of a character's bytes still comes back as those bytes: decode is byte-level.
  const std::string emoji = "\xf0\x9f\x98\x80";
  const auto ids = tok_->encode(emoji);
  ASSERT_GT(ids.size(), 1u);
  const std::string part = tok_->decode({ids[0]});
  EXPECT_LT(part.size(), emoji.size());
  EXPECT_EQ(emoji.substr(0, part.size()), part);
}

// Short pieces come from the cache after their first time, long ones never: both give the ids
// of a first pass, and so does a text of more distinct pieces than the cache holds.
TEST_F(Gpt2Real, CachedAndUncachedPiecesAgree) {
  const std::string text = "the the cache " + std::string(200, 'x') + " " + std::string(200, 'x') + " ok";
  const auto first = tok_->encode(text);
  EXPECT_EQ(tok_->encode(text), first);
  std::string many;
  for (int i = 0; i < 150000; ++i) many.append(" ").append(std::to_string(i)).append("x");
  const auto a = tok_->encode(many), b = tok_->encode(many);
  EXPECT_EQ(a, b);
  EXPECT_EQ(tok_->decode(a), many);
  EXPECT_EQ(tok_->encode(text), first);
}

TEST_F(Gpt2Real, LongRunsOfOneClassAreOnePieceEach) {
  // A megabyte of letters, then of spaces: the pattern and the merges stay linear-ish.
  const std::string letters(1 << 20, 'a'), spaces = std::string(1 << 20, ' ') + "b";
  EXPECT_EQ(tok_->decode(tok_->encode(letters)), letters);
  EXPECT_EQ(tok_->decode(tok_->encode(spaces)), spaces);
}

TEST_F(Gpt2Real, DecodeRejectsIdsOutsideTheVocabulary) {
  EXPECT_THAT(error_of([&] { tok_->decode({15496, 50257}); }), HasSubstr("id 50257 at position 1"));
  EXPECT_EQ(error_kind_of([&] { tok_->decode({-1}); }), ErrorKind::data);
}

// A vocabulary made here: the 256 byte tokens (id = byte), "ab" = 256, "aba" = 257. Its merges
// are in an order GPT-2's are not ("ab a" before "a b"), which tells a round of Encoder.js
// (every "a b" first) from merging one pair at a time.
class Gpt2Tiny : public testing_util::TempDirTest {
 protected:
  static std::string byte_char(int b) {
    int next = 256;
    for (int x = 0; x < 256; ++x) {
      const bool printable = (x >= '!' && x <= '~') || (x >= 0xA1 && x <= 0xAC) || (x >= 0xAE && x <= 0xFF);
      const int cp = printable ? x : next++;
      if (x == b) {
        std::string s;
        if (cp < 0x80) {
          s += char(cp);
        } else {
          s += char(0xC0 | (cp >> 6));
          s += char(0x80 | (cp & 0x3F));
        }
        return s;
      }
    }
    return "";
  }
  void write_vocab(const std::string& merges = "#version: 0.2\nab a\na b\n", int drop_byte = -1) {
    nlohmann::json enc = nlohmann::json::object();
    for (int b = 0; b < 256; ++b)
      if (b != drop_byte) enc[byte_char(b)] = b;
    enc["ab"] = 256;
    enc["aba"] = 257;
    enc["<|endoftext|>"] = 258;
    if (drop_byte >= 0) enc["<|pad|>"] = drop_byte;
    write("encoder.json", enc.dump());
    write("vocab.bpe", merges);
  }
  std::string dir() const { return dir_.string(); }
};

TEST_F(Gpt2Tiny, MergesEveryOccurrenceOfThePairBeforeTheirNewPairs) {
  write_vocab();
  const auto tok = load_gpt2_tokenizer(dir());
  EXPECT_EQ(tok->vocab_size(), 259);
  EXPECT_EQ(tok->special("<|endoftext|>"), 258);
  const std::vector<std::string> texts = {"aba", "abab", "ababa", "abababab", "xab", "b a"};
  const std::vector<std::vector<int32_t>> want = {{257},      {256, 256},     {256, 257}, {256, 256, 256, 256},
                                                  {'x', 256}, {'b', ' ', 'a'}};
  for (size_t i = 0; i < texts.size(); ++i) EXPECT_EQ(tok->encode(texts[i]), want[i]) << texts[i];
  // The same from Encoder.js itself, reading this folder's files.
  const std::string js = data_dir("gpt2") + "/Encoder.js";
  if (!missing_reference("node", {js}).empty()) return;
  std::filesystem::copy_file(js, path("Encoder.js"));
  EXPECT_EQ(reference_ids("node", "gpt2_js_ids.js", dir(), texts, path("strings.json")), want);
}

TEST_F(Gpt2Tiny, InvalidUtf8IsADataErrorNamingTheOffset) {
  write_vocab();
  const auto tok = load_gpt2_tokenizer(dir());
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"ab\xff", "byte 0xFF at offset 2"},           {"abc\xc3", "byte 0xC3 at offset 3"},        // stray, cut
      {"\xc0\xaf", "byte 0xC0 at offset 0"},         {"a\xed\xa0\x80", "byte 0xED at offset 1"},  // overlong, surrogate
      {"\xf4\x90\x80\x80", "byte 0xF4 at offset 0"}, {"ok \x80", "byte 0x80 at offset 3"}};  // > U+10FFFF, continuation
  for (const auto& [text, says] : cases) {
    EXPECT_THAT(error_of([&] { tok->encode(text); }), HasSubstr(says));
    EXPECT_EQ(error_kind_of([&] { tok->encode(text); }), ErrorKind::data);
  }
  EXPECT_EQ(tok->encode("\xf4\x8f\xbf\xbf").size(), 4u);  // U+10FFFF is valid: four byte tokens
}

TEST_F(Gpt2Tiny, FileErrorsNameTheFileAndWhere) {
  EXPECT_THAT(error_of([&] { load_gpt2_tokenizer(path("nowhere")); }), HasSubstr(path("nowhere") + "/encoder.json"));
  write("encoder.json", "{\"a\": 1,");
  EXPECT_THAT(error_of([&] { load_gpt2_tokenizer(dir()); }), HasSubstr("encoder.json: invalid JSON at byte offset"));
  write("encoder.json", "{\"a\": [1]}");
  EXPECT_THAT(error_of([&] { load_gpt2_tokenizer(dir()); }), HasSubstr("nested JSON value at byte offset 6"));
  write("encoder.json", "{\"a\": \"x\", \"b\": 0}");
  EXPECT_THAT(error_of([&] { load_gpt2_tokenizer(dir()); }),
              HasSubstr("entry \"a\" has a value that is not an integer"));
  write("encoder.json", "{\"a\": 5, \"b\": 0}");
  EXPECT_THAT(error_of([&] { load_gpt2_tokenizer(dir()); }), HasSubstr("entry \"a\" has id 5, outside [0, 2)"));
  write("encoder.json", "{\"a\": 0, \"b\": 0}");
  EXPECT_THAT(error_of([&] { load_gpt2_tokenizer(dir()); }), HasSubstr("entry \"b\" repeats id 0"));
  write("encoder.json", "{\"a b\": 0}");
  EXPECT_THAT(error_of([&] { load_gpt2_tokenizer(dir()); }), HasSubstr("entry \"a b\" (id 0) has a character outside"));
  write_vocab("#version: 0.2\n", 'q');
  EXPECT_THAT(error_of([&] { load_gpt2_tokenizer(dir()); }), HasSubstr("no entry \"q\" for byte 113"));
  write_vocab("#version: 0.2\na b\nab\n");
  EXPECT_THAT(error_of([&] { load_gpt2_tokenizer(dir()); }), HasSubstr("vocab.bpe line 3: expected two tokens"));
  write_vocab("#version: 0.2\na b\nab c\n");
  EXPECT_THAT(error_of([&] { load_gpt2_tokenizer(dir()); }),
              HasSubstr("vocab.bpe line 3: \"abc\" is not in encoder.json"));
  EXPECT_EQ(error_kind_of([&] { load_gpt2_tokenizer(dir()); }), ErrorKind::data);
  // As Encoder.js, the last line is no merge: without a final newline "ab a" is dropped.
  write_vocab("#version: 0.2\na b\nab a");
  EXPECT_EQ(load_gpt2_tokenizer(dir())->encode("aba"), (std::vector<int32_t>{256, 'a'}));
}

TEST(Tokenizer, LoadTokenizerNamesTheKinds) {
  EXPECT_THAT(error_of([] { load_tokenizer("sentencepiece", "x"); }), HasSubstr("allowed: gpt2, bert"));
}

}  // namespace
}  // namespace zt::data
