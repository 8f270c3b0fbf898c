// SentencePiece .model files: models spm_train makes here from the English corpus (a unigram one
// with the default normalization, a lossless BPE one with byte fallback) give spm_encode's ids,
// decode back, and name their control pieces; bad files are one data error.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "../common/shell_word.h"
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
using zt::testing::shell_word;

// One line each (spm_encode reads lines): white space runs, scripts, digits, symbols.
const std::vector<std::string> kEdge = {
    "Hello world!",
    "  two  spaces  and\ttabs\t",
    "Café naïve résumé Straße ÉCOLE",
    "日本語のテキスト",
    "emoji 😀👍🏽 here",
    "1234567 3.14 1,000,000",
    "I'm sure they'd say: \"don't\"",
    "<s> </s> <unk>",
    "ＡＢＣ１２３ ﬁ",
    "x\u00a0y\u3000z",
    "",
    "q",
};

class SentencePieceModels : public testing_util::TempDirTest {
 protected:
  static void SetUpTestSuite() {
    if (!have_program("spm_train") || !have_program("spm_encode")) {
      why_ = "spm_train/spm_encode are not installed (scripts/setup.sh installs the sentencepiece package)";
      return;
    }
    const std::vector<std::string> lines = corpus_lines(400);
    if (lines.size() < 400) {
      why_ = "data/moby-dick or data/sotu is missing; run scripts/setup.sh";
      return;
    }
    dir_s_ = (std::filesystem::temp_directory_path() / ("zt_spm_" + std::to_string(getpid()))).string();
    std::filesystem::create_directories(dir_s_);
    std::ofstream corpus(dir_s_ + "/corpus.txt");
    for (const std::string& l : lines) corpus << l << "\n";
    corpus.close();
    const std::string base =
        "spm_train --minloglevel=2 --input=" + shell_word(dir_s_ + "/corpus.txt") + " --model_prefix=";
    train(base + shell_word(dir_s_ + "/uni") + " --vocab_size=300 --model_type=unigram");
    train(base + shell_word(dir_s_ + "/bpe") +
          " --vocab_size=600 --model_type=bpe --byte_fallback=true --character_coverage=1.0"
          " --normalization_rule_name=identity --remove_extra_whitespaces=false");
  }
  static void TearDownTestSuite() {
    if (!dir_s_.empty()) std::filesystem::remove_all(dir_s_);
  }
  static void train(const std::string& cmd) {
    if (std::system((cmd + " >/dev/null 2>&1").c_str()) != 0) why_ = cmd + " failed";
  }
  void SetUp() override {
    TempDirTest::SetUp();
    if (!why_.empty()) GTEST_SKIP() << why_;
  }
  static std::string model(const std::string& name) { return dir_s_ + "/" + name + ".model"; }

  // spm_encode --output_format=id, one line per text.
  std::vector<std::vector<int32_t>> spm_encode(const std::string& name, const std::vector<std::string>& texts) {
    std::ofstream in(path("in.txt"), std::ios::binary);
    for (const std::string& t : texts) in << t << "\n";
    in.close();
    const std::string cmd = "spm_encode --output_format=id --model=" + shell_word(model(name)) + " < " +
                            shell_word(path("in.txt")) + " > " + shell_word(path("out.txt"));
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
    std::vector<std::vector<int32_t>> out;
    std::ifstream res(path("out.txt"));
    for (std::string line; std::getline(res, line);) {
      std::istringstream ids(line);
      out.emplace_back();
      for (int32_t id; ids >> id;) out.back().push_back(id);
    }
    return out;
  }

  std::vector<std::string> texts() const {
    std::vector<std::string> all = corpus_lines(500);
    all.erase(all.begin(), all.begin() + 380);  // 20 lines it learnt from, 100 it did not
    all.insert(all.end(), kEdge.begin(), kEdge.end());
    return all;
  }

  static inline std::string why_, dir_s_;
};

TEST_F(SentencePieceModels, GiveSpmEncodesIds) {
  for (const char* name : {"uni", "bpe"}) {
    const auto tok = load_sentencepiece(model(name));
    const std::vector<std::string> all = texts();
    const auto expected = spm_encode(name, all);
    ASSERT_EQ(expected.size(), all.size()) << name;
    for (size_t i = 0; i < all.size(); ++i) EXPECT_EQ(tok->encode(all[i]), expected[i]) << name << ": " << all[i];
  }
}

TEST_F(SentencePieceModels, NameVocabularyAndControlPieces) {
  const auto tok = load_sentencepiece(model("uni"));
  EXPECT_STREQ(tok->name(), "sentencepiece");
  EXPECT_EQ(tok->vocab_size(), 300);
  EXPECT_EQ(tok->special("<unk>"), 0);
  EXPECT_EQ(tok->special("<s>"), 1);
  EXPECT_EQ(tok->special("</s>"), 2);
  EXPECT_EQ(tok->special("the"), -1);
  EXPECT_EQ(tok->special("<nothing>"), -1);
  EXPECT_THAT(error_of([&] { tok->decode({5, 300}); }), HasSubstr("id 300 at position 1"));
  EXPECT_THAT(error_of([&] { tok->encode("ok \xff"); }), HasSubstr("byte 0xFF at offset 3"));
}

// The identity-normalized model with byte fallback loses nothing; the default one folds
// full-width forms (NFKC) and runs of spaces and has no byte pieces, so only plain text without
// <unk> comes back as it was.
TEST_F(SentencePieceModels, DecodeInvertsEncodeWhereTheModelIsLossless) {
  const auto bpe = load_sentencepiece(model("bpe")), uni = load_sentencepiece(model("uni"));
  for (const std::string& s : texts()) EXPECT_EQ(bpe->decode(bpe->encode(s)), s);
  int plain = 0;
  for (const std::string& s : corpus_lines(400)) {
    const std::vector<int32_t> ids = uni->encode(s);
    if (std::find(ids.begin(), ids.end(), 0) != ids.end() || s.find("  ") != std::string::npos) continue;
    EXPECT_EQ(uni->decode(ids), s);
    ++plain;
  }
  EXPECT_GT(plain, 200);
  EXPECT_EQ(uni->decode(uni->encode("a  b")), "a b");
}

TEST(SentencePieceFiles, BadFilesAreOneDataError) {
  const std::string bad = ::testing::TempDir() + "not_a_model.model";
  std::ofstream(bad) << "this is no protobuf";
  EXPECT_THAT(error_of([&] { load_sentencepiece(bad); }), HasSubstr(bad + ": not a SentencePiece model"));
  EXPECT_EQ(error_kind_of([&] { load_sentencepiece(bad); }), ErrorKind::data);
  EXPECT_THAT(error_of([&] { load_sentencepiece(bad + ".none"); }), HasSubstr("cannot open " + bad + ".none"));
  std::filesystem::remove(bad);
}

}  // namespace
}  // namespace zt::data
