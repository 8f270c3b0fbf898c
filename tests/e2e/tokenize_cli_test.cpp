// `zerotrain tokenize` as a user runs it: stdin as one text or line by line, JSON on stdout, and
// one-line errors. Tiny vocabularies are made here; the real ones are used when fetched.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <string>

#include "e2e_util.h"

namespace {

using namespace zt::e2e;

const std::string kBin = zt::testing::shell_word(ZT_BIN);  // a shell word wherever the clone lives

// A WordPiece vocabulary in vocab.json's form: "un aff able" and "a" with continuations.
std::string tiny_bert() {
  // One folder per test: ctest runs this binary's tests in parallel.
  const std::string dir = tmpdir(std::string("tokenize_bert_") +
                                 ::testing::UnitTest::GetInstance()->current_test_info()->name());
  write_file(dir + "/vocab.json", R"(["[PAD]","[UNK]","[CLS]","[SEP]","[MASK]","▁un","aff","able","▁a","a","▁,"])");
  return dir;
}

std::string input(const std::string& name, const std::string& bytes) {
  const std::string path = tmpdir("tokenize_in_" + name) + "/in.txt";
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

TEST(TokenizeCli, AllOfStdinIsOneArray) {
  const std::string dir = tiny_bert();
  const Result r = run(kBin + " tokenize --tokenizer bert --dir " + dir + " < " + input("one", "Unaffable,\na\n"), 30);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out, "[5,6,7,10,8]\n");
}

TEST(TokenizeCli, LinesGiveOneArrayEachAndALastLineWithoutNewlineCounts) {
  const std::string dir = tiny_bert();
  const std::string cmd = kBin + " tokenize --tokenizer bert --lines --dir " + dir + " < ";
  Result r = run(cmd + input("lines", "unaffable\n\naa zz\na"), 30);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out, "[5,6,7]\n[]\n[8,9,1]\n[8]\n");
  r = run(cmd + input("empty", ""), 30);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out, "");
}

TEST(TokenizeCli, ErrorsAreOneLine) {
  const std::string dir = tiny_bert();
  Result r = run(kBin + " tokenize --tokenizer bert --lines --dir " + dir + " < " + input("bad", "ok\nab\xff\n"), 30);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_EQ(count_lines(r.out), 1) << r.out;
  EXPECT_NE(r.out.find("line 2: [tokenizer] bert: input is not valid UTF-8: byte 0xFF at offset 2"), std::string::npos)
      << r.out;
  r = run(kBin + " tokenize --tokenizer gpt2 --dir " + dir + " < /dev/null", 30);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find(dir + "/encoder.json"), std::string::npos) << r.out;
  r = run(kBin + " tokenize --tokenizer wordpiece < /dev/null", 30);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("not in {gpt2,bert}"), std::string::npos) << r.out;
}

TEST(TokenizeCli, RealVocabulariesFromTheDefaultFolders) {
  if (!fs::exists(fs::path(ZT_SOURCE_DIR) / "data/gpt2/encoder.json") ||
      !fs::exists(fs::path(ZT_SOURCE_DIR) / "data/bert/vocab.json"))
    GTEST_SKIP() << "data/gpt2 or data/bert not present; run scripts/setup.sh";
  const std::string in = input("real", "Hello world");
  Result r = run(kBin + " tokenize --tokenizer gpt2 < " + in, 30);
  EXPECT_EQ(r.out, "[15496,995]\n");
  r = run(kBin + " tokenize --tokenizer bert < " + in, 30);
  EXPECT_EQ(r.out, "[7592,2088]\n");
}

// --decode reads ids separated by spaces or commas, or tokenize's own JSON, back into text.
TEST(TokenizeCli, DecodeTurnsIdsBackIntoText) {
  const std::string dir = tiny_bert();
  const std::string cmd = kBin + " tokenize --tokenizer bert --dir " + dir + " --decode";
  Result r = run(cmd + " < " + input("ids", "5 6,7\n[8]\n"), 30);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out, "unaffable a");
  r = run(cmd + " --lines < " + input("id_lines", "[5,6,7]\n[]\n8"), 30);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out, "unaffable\n\na\n");
  r = run(cmd + " --lines < " + input("bad_ids", "5\n6 x7\n"), 30);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_EQ(count_lines(r.out), 1) << r.out;
  EXPECT_NE(r.out.find("standard input line 2: 'x7' at byte offset 2 is not a token id"), std::string::npos) << r.out;
  r = run(cmd + " < " + input("far_id", "5 99"), 30);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("id 99 at position 1 is outside the vocabulary [0, 11)"), std::string::npos) << r.out;
}

// --tokenizer takes a tokenizer.json (or its folder); a broken one is one line naming the key.
TEST(TokenizeCli, TokenizerJsonFilesAndFolders) {
  const std::string dir = tmpdir("tokenize_json");
  write_file(dir + "/tokenizer.json", "{\"model\": {\"type\": \"Unigram\"}}");
  Result r = run(kBin + " tokenize --tokenizer " + dir + " < " + input("json_bad", "hi"), 30);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_EQ(count_lines(r.out), 1) << r.out;
  EXPECT_NE(r.out.find(dir + "/tokenizer.json: model.type: expected \"BPE\" or \"WordPiece\""), std::string::npos)
      << r.out;
  const fs::path llama3 = fs::path(ZT_SOURCE_DIR) / "data/llama3/tokenizer.json";
  if (!fs::exists(llama3)) GTEST_SKIP() << llama3 << " not present; run scripts/setup.sh";
  r = run(kBin + " tokenize --tokenizer " + zt::testing::shell_word(llama3.string()) + " < " +
              input("llama3", "Hello world!"),
          60);
  EXPECT_EQ(r.out, "[9906,1917,0]\n");
  r = run(kBin + " tokenize --decode --tokenizer " + zt::testing::shell_word(llama3.parent_path().string()) + " < " +
              input("llama3_ids", "[128000,9906,1917,0]"),
          60);
  EXPECT_EQ(r.out, "<|begin_of_text|>Hello world!");
}

// Issue 31, probe case 13: one "word" of 10 MB (no space in it) tokenizes in bounded memory: its
// merges run in 64 KiB parts (725 MB of peak memory before, about 70 bytes per byte).
TEST(TokenizeCli, OneTenMegabyteWordTakesBoundedMemory) {
  if (!fs::exists(fs::path(ZT_SOURCE_DIR) / "data/gpt2/encoder.json")) GTEST_SKIP() << "data/gpt2 not present";
  const std::string in = input("long_word", std::string(10 << 20, 'q'));
  const Result r = run(kBin + " tokenize --tokenizer gpt2 < " + in + " > /dev/null", 120);
  EXPECT_EQ(r.code, 0) << r.out;
  struct rusage ru{};
  ASSERT_EQ(getrusage(RUSAGE_CHILDREN, &ru), 0);
#if !defined(__SANITIZE_ADDRESS__)  // AddressSanitizer's shadow and redzones are not the tokenizer's
  EXPECT_LT(ru.ru_maxrss, 200 << 10) << "peak RSS of the tokenizer: " << (ru.ru_maxrss >> 10) << " MiB";  // KiB
#endif
}

}  // namespace
