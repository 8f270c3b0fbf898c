// `zerotrain prepare` as a user runs it, on a small corpus made here: help and usage errors
// always; with the real tokenizers (data/gpt2, data/bert, or under $ZT_DATA_DIR) the shards and
// records it writes, decoded back to the text, and outputs replaced whole or not at all.
#include <gtest/gtest.h>

#include <cstdlib>

#include "data/corpus_files.h"
#include "e2e_util.h"
#include "zt/core/error.h"
#include "zt/data/seq_cls.h"
#include "zt/data/token_shard.h"
#include "zt/data/tokenizer.h"

namespace {

using namespace zt::e2e;
using zt::data::testing::write_fake_corpus;

const std::string kBin = zt::testing::shell_word(ZT_BIN);  // a shell word wherever the clone lives

const std::vector<std::string> kNames = {"1790_a_d.txt", "1791_b_r.txt", "1792_c_r.txt", "1793_d_w.txt",
                                         "1795_e_d.txt", "1796_f_r.txt", "1800_g_d.txt", "1801_h_r.txt"};

// Where the tokenizers are: $ZT_DATA_DIR (as scripts/setup.sh takes it), else <repo>/data.
std::string tokenizer_dir(const std::string& kind) {
  const char* env = std::getenv("ZT_DATA_DIR");
  return ((env && *env) ? fs::path(env) : fs::path(ZT_SOURCE_DIR) / "data").append(kind).string();
}
bool have(const std::string& kind) {
  return fs::exists(tokenizer_dir(kind) + (kind == "gpt2" ? "/encoder.json" : "/vocab.json"));
}

std::string last_line(const std::string& s) {
  const size_t end = s.find_last_not_of('\n');
  const size_t b = s.rfind('\n', end);
  return s.substr(b == std::string::npos ? 0 : b + 1, end - (b == std::string::npos ? 0 : b + 1) + 1);
}

TEST(PrepareCli, HelpNamesEveryOption) {
  Result r = run(kBin + " prepare --help");
  EXPECT_EQ(r.code, 0) << r.out;
  for (const char* o : {"--task", "--tokenizer", "--out", "--data-dir", "--tokenizer-dir", "--sources", "--input",
                        "--text-key", "--val-fraction", "--max-len"})
    EXPECT_NE(r.out.find(o), std::string::npos) << o << "\n" << r.out;
  EXPECT_NE(run(kBin + " --help").out.find("prepare"), std::string::npos);
}

TEST(PrepareCli, UsageErrorsExitTwoWithOneLine) {
  const std::string out = " --out " + tmpdir("prepare_usage") + "/o";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"prepare --tokenizer gpt2", "--out is required"},
      {"prepare" + out, "--tokenizer is required"},
      {"prepare --tokenizer gpt3" + out, "gpt3"},
      {"prepare --tokenizer gpt2 --task mlm" + out, "mlm"},
      {"prepare --tokenizer gpt2 --val-fraction 0.7" + out, "'0.7' is not a number in (0, 0.5]"},
      {"prepare --tokenizer gpt2 --val-fraction 0" + out, "'0' is not a number in (0, 0.5]"},
      {"prepare --tokenizer gpt2 --max-len 64" + out, "--max-len: is for --task sotu-party"},
      {"prepare --tokenizer bert --task sotu-party --sources sotu" + out, "--sources: is for --task lm"},
      {"prepare --tokenizer bert --task sotu-party --max-len 4" + out, "4"},
      {"prepare --tokenizer gpt2 --frobnicate" + out, "frobnicate"},
      {"prepare --tokenizer gpt2 --input a.txt --sources sotu" + out, "--sources excludes --input"},
      {"prepare --tokenizer gpt2 --text-key body" + out, "--text-key requires --input"},
      {"prepare --tokenizer bert --task sotu-party --input a.txt" + out, "--input: is for --task lm"},
  };
  for (const auto& [args, says] : cases) {
    Result r = run(kBin + " " + args);
    EXPECT_EQ(r.code, 2) << args << ": " << r.out;
    EXPECT_EQ(count_lines(r.out), 1) << args << ": " << r.out;
    EXPECT_NE(r.out.find(says), std::string::npos) << args << ": " << r.out;
  }
}

TEST(PrepareCli, AMissingTokenizerFolderIsOneLineNamingIt) {
  const std::string d = tmpdir("prepare_no_tok");
  Result r = run(kBin + " prepare --tokenizer gpt2 --data-dir " + d + " --out " + d + "/o", 30);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_EQ(count_lines(r.out), 1) << r.out;
  EXPECT_NE(r.out.find("tokenizer folder " + d + "/gpt2 not found"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(d + "/o"));
  // Something there that is no folder is said as it is, not "not found".
  write_file(d + "/tok", "a file");
  r = run(kBin + " prepare --tokenizer gpt2 --tokenizer-dir " + d + "/tok --out " + d + "/o", 30);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_EQ(count_lines(r.out), 1) << r.out;
  EXPECT_NE(r.out.find("tokenizer folder " + d + "/tok is a file, not a folder"), std::string::npos) << r.out;
}

class PrepareReal : public ::testing::Test {
 protected:
  void need(const std::string& kind) {
    if (!have(kind)) GTEST_SKIP() << "no " << kind << " tokenizer in " << tokenizer_dir(kind) << " (scripts/setup.sh)";
    tok_ = zt::data::load_tokenizer(kind, tokenizer_dir(kind));
  }
  std::string prepare(const std::string& kind, const std::string& args) {
    return kBin + " prepare --tokenizer " + kind + " --tokenizer-dir " + zt::testing::shell_word(tokenizer_dir(kind)) +
           " --data-dir " + data_ + " --out " + out_ + " " + args;
  }
  std::string dir_ =
      tmpdir("prepare_real_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
  std::string data_ = write_fake_corpus(dir_ + "/data", kNames, 9);
  std::string out_ = dir_ + "/out";
  std::unique_ptr<zt::data::Tokenizer> tok_;
};

TEST_F(PrepareReal, Gpt2ShardsDecodeToTheHeldOutDocuments) {
  need("gpt2");
  Result r = run(prepare("gpt2", "--val-fraction 0.25"), 120);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("held out: sotu/1793_d_w.txt, sotu/1801_h_r.txt, moby-dick/data.txt#val"), std::string::npos)
      << r.out;
  const auto val = zt::data::read_token_shard(out_ + "/val_000000.bin");
  const auto train = zt::data::read_token_shard(out_ + "/train_000000.bin");
  const std::string text = tok_->decode(std::vector<int32_t>(val.begin(), val.end()));
  const std::string address = slurp(data_ + "/sotu/1793_d_w.txt");
  EXPECT_TRUE(text.starts_with("<|endoftext|>" + address + "<|endoftext|>")) << text.substr(0, 300);
  EXPECT_EQ(tok_->decode(std::vector<int32_t>(train.begin(), train.end())).find(address), std::string::npos);
  const auto m = read_json(out_ + "/manifest.json");
  EXPECT_EQ(m["tokenizer"]["vocab_size"], 50257);
  EXPECT_EQ(m["tokens"]["val"], val.size());
  EXPECT_EQ(m["tokenizer"]["files"].size(), 2u);
  EXPECT_NE(r.out.find("train: 7 documents, " + std::to_string(train.size()) + " tokens"), std::string::npos) << r.out;
}

TEST_F(PrepareReal, AFailingRunLeavesTheEarlierOutputAndSaysOneError) {
  need("gpt2");
  ASSERT_EQ(run(prepare("gpt2", "--val-fraction 0.25"), 120).code, 0);
  const std::string before = slurp(out_ + "/train_000000.bin");
  write_file(data_ + "/sotu/1797_bad_d.txt", "Invalid \xC3\x28 UTF-8.");
  Result r = run(prepare("gpt2", "--val-fraction 0.25"), 120);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_EQ(count_of(r.out, "error"), 1) << r.out;
  EXPECT_NE(last_line(r.out).find("sotu/1797_bad_d.txt"), std::string::npos) << r.out;
  EXPECT_EQ(slurp(out_ + "/train_000000.bin"), before);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 2);  // data, out: no temporary
  // A folder prepare did not write is never replaced.
  fs::remove(data_ + "/sotu/1797_bad_d.txt");
  fs::create_directories(dir_ + "/mine");
  write_file(dir_ + "/mine/notes.txt", "keep");
  Result mine =
      run(kBin + " prepare --tokenizer gpt2 --tokenizer-dir " + zt::testing::shell_word(tokenizer_dir("gpt2")) +
              " --data-dir " + data_ + " --val-fraction 0.25 --out " + dir_ + "/mine",
          120);
  EXPECT_EQ(mine.code, 1) << mine.out;
  EXPECT_NE(mine.out.find("was not written by zerotrain prepare"), std::string::npos) << mine.out;
  EXPECT_EQ(slurp(dir_ + "/mine/notes.txt"), "keep");
}

TEST_F(PrepareReal, BertShardsSeparateDocumentsWithSep) {
  need("bert");
  Result r = run(prepare("bert", "--sources sotu --val-fraction 0.5"), 120);
  ASSERT_EQ(r.code, 0) << r.out;
  const auto val = zt::data::read_token_shard(out_ + "/val_000000.bin");
  ASSERT_FALSE(val.empty());
  EXPECT_EQ(val.front(), 102);  // [SEP]
  EXPECT_EQ(std::count(val.begin(), val.end(), 102), 4);
}

TEST_F(PrepareReal, SotuPartyRecordsAndTheMajorityBaseline) {
  need("bert");
  Result r = run(prepare("bert", "--task sotu-party --max-len 32"), 120);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("majority class (train): Republican; always answering it scores 0.0000 on test"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("dropped 1 addresses"), std::string::npos) << r.out;
  const zt::data::SeqClsSet test = zt::data::read_seq_cls(out_ + "/test.bin");
  ASSERT_GT(test.size(), 0);
  EXPECT_EQ(test.max_len, 32);
  for (int64_t i = 0; i < test.size(); ++i) {
    EXPECT_EQ(test.labels[size_t(i)], 0);  // 1790, 1795, 1800 are Democratic here
    EXPECT_EQ(test.tokens[size_t(test.offsets[size_t(i)])], 101);
    EXPECT_EQ(test.tokens[size_t(test.offsets[size_t(i) + 1] - 1)], 102);
  }
  const std::string first = tok_->decode({test.tokens.begin() + 1, test.tokens.begin() + 5});
  EXPECT_EQ(first.find("address 0"), 0u) << first;  // uncased
}

// Issue 53 cases 6 and 7: a file given twice is one document (said in a line), so it cannot be in
// both splits; prepare run twice over the folder that holds its --out reads the same documents.
TEST_F(PrepareReal, EachInputIsReadOnceAndNeverItsOwnOutput) {
  need("gpt2");
  const std::string in = dir_ + "/mine";
  fs::create_directories(in);
  for (int i = 0; i < 4; ++i) write_file(in + "/" + std::to_string(i) + ".txt", "Note " + std::to_string(i) + ".\n");
  Result r = run(prepare("gpt2", "--input " + in + "/0.txt " + in + "/1.txt " + in + "/0.txt --val-fraction 0.5"), 60);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("prepare: --input " + in + "/0.txt is " + in + "/0.txt again: read once\n"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("train: 1 documents"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("held out: " + in + "/1.txt\n"), std::string::npos) << r.out;

  const std::string again = kBin + " prepare --tokenizer gpt2 --tokenizer-dir " +
                            zt::testing::shell_word(tokenizer_dir("gpt2")) + " --input " + in + " --out " + in +
                            "/tokens --val-fraction 0.25";
  for (int run_no = 0; run_no < 2; ++run_no) {
    r = run(again, 60);
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_NE(r.out.find("train: 3 documents"), std::string::npos) << "run " << run_no << ": " << r.out;
    EXPECT_NE(r.out.find("val:   1 documents"), std::string::npos) << "run " << run_no << ": " << r.out;
  }
  EXPECT_NE(r.out.find("(--out " + in + "/tokens and its temporaries are never read)"), std::string::npos) << r.out;
}

// Note [your own text]: a folder of the user's text and a JSON lines file become token shards a
// GPT config trains on; a file that is not text is one line naming it, and nothing is written.
TEST_F(PrepareReal, YourOwnTextTrainsAGpt) {
  need("gpt2");
  fs::create_directories(dir_ + "/mine/notes");
  for (int i = 0; i < 8; ++i)
    write_file(dir_ + "/mine/notes/" + std::to_string(i) + ".txt",
               "Note " + std::to_string(i) + ": the quick brown fox jumps over the lazy dog.\n\nAgain and again.\n");
  write_file(dir_ + "/mine/posts.jsonl", "{\"body\": \"A post.\"}\n{\"body\": \"Another post, longer.\"}\n");
  Result r = run(prepare("gpt2", "--input " + dir_ + "/mine --text-key body --val-fraction 0.25"), 120);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("train: 8 documents"), std::string::npos) << r.out;  // 10 documents, every 4th held out
  EXPECT_NE(r.out.find("val:   2 documents"), std::string::npos) << r.out;
  r = run(kBin +
              " train --config configs/gpt_own_text.json model.n_layer=1 model.n_embd=32 model.n_head=2 "
              "model.block_size=16 train_batch_size=4 train_micro_batch_size_per_gpu=4 run.max_steps=2 "
              "data.eval_every=0 data.dir=" +
              out_ + " run.dir=" + dir_ + "/run",
          120);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(fs::exists(dir_ + "/run/model.safetensors")) << r.out;

  write_file(dir_ + "/packed.txt.gz", std::string("\x1f\x8b\x08\x00", 4));
  r = run(kBin + " prepare --tokenizer gpt2 --tokenizer-dir " + zt::testing::shell_word(tokenizer_dir("gpt2")) +
              " --input " + dir_ + "/packed.txt.gz --out " + dir_ + "/out2",
          60);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(last_line(r.out).find(dir_ + "/packed.txt.gz is gzip-compressed, not text"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(dir_ + "/out2"));
}

// Llama 3's tokenizer.json (128,256 ids; scripts/setup.sh writes it): uint32 (version 2) shards,
// each document after <|begin_of_text|>, and the file's sha256 in the manifest.
TEST_F(PrepareReal, Llama3TokenizerJsonWritesUint32Shards) {
  const std::string file = tokenizer_dir("llama3") + "/tokenizer.json";
  if (!fs::exists(file)) GTEST_SKIP() << file << " not present (scripts/setup.sh)";
  write_file(dir_ + "/mine.txt", "Hello world!\n\nAgain.\n");
  Result r = run(kBin + " prepare --tokenizer " + zt::testing::shell_word(file) + " --input " + dir_ +
                     "/mine.txt --val-fraction 0.5 --out " + out_,
                 120);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("tokenizer tokenizer.json (128256 ids)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("shards: version 2 (uint32 tokens)"), std::string::npos) << r.out;
  const std::string bytes = slurp(out_ + "/train_000000.bin");
  EXPECT_EQ(zt::data::check_token_shard_header(bytes.data(), bytes.size(), "train").version, 2);
  const auto train = zt::data::read_token_shard32(out_ + "/train_000000.bin");
  const auto val = zt::data::read_token_shard32(out_ + "/val_000000.bin");
  ASSERT_GE(train.size(), 4u);  // "!\n\n" is one piece in Llama 3
  EXPECT_EQ(std::vector<uint32_t>(train.begin(), train.begin() + 3), (std::vector<uint32_t>{128000, 9906, 1917}));
  ASSERT_FALSE(val.empty());
  EXPECT_EQ(val[0], 128000u);
  const auto m = read_json(out_ + "/manifest.json");
  EXPECT_EQ(m["tokenizer"]["name"], "tokenizer.json");
  EXPECT_EQ(m["tokenizer"]["vocab_size"], 128256);
  EXPECT_EQ(m["separator"]["token"], "<|begin_of_text|>");
  ASSERT_EQ(m["tokenizer"]["files"].size(), 1u);
  EXPECT_EQ(m["tokenizer"]["files"][0]["path"], file);
  // --tokenizer-dir is gpt2's and bert's: with a file it is a usage error.
  r = run(kBin + " prepare --tokenizer " + zt::testing::shell_word(file) + " --tokenizer-dir " + dir_ + " --input " +
              dir_ + "/mine.txt --out " + out_,
          30);
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--tokenizer-dir: is for --tokenizer gpt2 or bert"), std::string::npos) << r.out;
}

}  // namespace
