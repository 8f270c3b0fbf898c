// prepare_lm and prepare_sotu_party on a fake corpus with a byte tokenizer: the held-out rule,
// separators, manifests, and outputs that are replaced whole or not at all.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/error_of.h"
#include "common/temp_dir.h"
#include "corpus_files.h"
#include "fake_tokenizer.h"
#include "zt/core/sha256.h"
#include "zt/data/corpus.h"
#include "zt/data/prepare.h"
#include "zt/data/seq_cls.h"
#include "zt/data/token_shard.h"

namespace zt::data {
namespace {

namespace fs = std::filesystem;
using testing::ByteTokenizer;
using ::testing::HasSubstr;
using testing::write_fake_corpus;
using testing_util::error_kind_of;
using testing_util::error_of;

const std::vector<std::string> kNames = {"1790_a_d.txt", "1791_b_r.txt", "1792_c_r.txt", "1793_d_w.txt",
                                         "1795_e_d.txt", "1796_f_r.txt", "1800_g_d.txt", "1801_h_r.txt"};

nlohmann::json read_json(const std::string& p) { return nlohmann::json::parse(std::ifstream(p)); }

// Documents of a shard: the runs after each separator.
std::vector<std::string> documents(const std::vector<uint16_t>& tokens, uint16_t sep, int shift = 0) {
  std::vector<std::string> out;
  for (uint16_t t : tokens) {
    if (t == sep)
      out.emplace_back();
    else
      out.back().push_back(char(t - shift));
  }
  return out;
}

class PrepareLm : public testing_util::TempDirTest {
 protected:
  PrepareLmOptions opts(double val_fraction = 0.25) {
    PrepareLmOptions o;
    o.data_dir = write_fake_corpus(path("data"), kNames, 3);
    o.out = path("out/tokens");
    o.val_fraction = val_fraction;
    return o;
  }
  ByteTokenizer gpt2_;
};

TEST_F(PrepareLm, EveryKthAddressAndMobyDicksTailAreHeldOutWhole) {
  const PrepareLmOptions o = opts(0.25);  // k = 4: addresses 3 and 7
  std::vector<std::string> lines;
  const PrepareLmReport r = prepare_lm(o, gpt2_, [&](const std::string& s) { lines.push_back(s); });
  EXPECT_EQ(r.val_names,
            (std::vector<std::string>{"sotu/1793_d_w.txt", "sotu/1801_h_r.txt", "moby-dick/data.txt#val"}));
  EXPECT_EQ(r.train_documents, 7);  // 6 addresses and the book's head
  EXPECT_FALSE(lines.empty());

  const auto train = read_token_shard(o.out + "/train_000000.bin");
  const auto val = read_token_shard(o.out + "/val_000000.bin");
  EXPECT_EQ(int64_t(train.size()), r.train_tokens);
  EXPECT_EQ(int64_t(val.size()), r.val_tokens);
  ASSERT_EQ(train.front(), 256);  // a separator before every document
  ASSERT_EQ(val.front(), 256);
  const auto tr = documents(train, 256), va = documents(val, 256);
  ASSERT_EQ(tr.size(), 7u);
  ASSERT_EQ(va.size(), 3u);
  std::ifstream f(o.data_dir + "/sotu/1793_d_w.txt");
  EXPECT_EQ(va[0], std::string((std::istreambuf_iterator<char>(f)), {}));  // a whole address, byte for byte
  // The book split at a paragraph start, about the last quarter, and nothing lost or doubled.
  std::ifstream b(o.data_dir + "/moby-dick/data.txt");
  const std::string book((std::istreambuf_iterator<char>(b)), {});
  EXPECT_EQ(tr.back() + va.back(), book);
  const size_t cut = tr.back().size();
  EXPECT_GE(cut, book.size() * 3 / 4);
  EXPECT_LT(cut, book.size() * 3 / 4 + 50);  // the next paragraph start
  EXPECT_TRUE(tr.back().ends_with("\n\n") && va.back().starts_with("CHAPTER "));
  for (const std::string& d : tr) EXPECT_EQ(d.find("Address 3 "), std::string::npos);
}

TEST_F(PrepareLm, ManifestRecordsTokenizerCountsAndInputHashes) {
  PrepareLmOptions o = opts();
  o.tokenizer_files = {{"gpt2/encoder.json", "abc123"}};
  const PrepareLmReport r = prepare_lm(o, gpt2_);
  const auto m = read_json(o.out + "/manifest.json");
  EXPECT_EQ(m["writer"], "zerotrain prepare");
  EXPECT_EQ(m["tokenizer"]["name"], "gpt2");
  EXPECT_EQ(m["tokenizer"]["vocab_size"], 257);
  EXPECT_EQ(m["tokenizer"]["files"][0]["sha256"], "abc123");
  EXPECT_EQ(m["separator"]["id"], 256);
  EXPECT_EQ(m["tokens"]["train"], r.train_tokens);
  EXPECT_EQ(m["tokens"]["val"], r.val_tokens);
  ASSERT_EQ(m["inputs"].size(), 10u);
  std::ifstream f(o.data_dir + "/sotu/1790_a_d.txt");
  EXPECT_EQ(m["inputs"][0]["sha256"], sha256_hex(std::string((std::istreambuf_iterator<char>(f)), {})));
  EXPECT_EQ(m["inputs"][0]["split"], "train");
}

TEST_F(PrepareLm, BertShardsUseSepAndOneSourceWorks) {
  PrepareLmOptions o = opts(0.5);  // k = 2: every second address
  o.sources = {"sotu"};
  const PrepareLmReport r = prepare_lm(o, ByteTokenizer(/*bert=*/true));
  EXPECT_EQ(r.val_documents, 4);
  EXPECT_EQ(r.train_documents, 4);
  const auto val = read_token_shard(o.out + "/val_000000.bin");
  EXPECT_EQ(val.front(), 3);  // [SEP]
  EXPECT_EQ(documents(val, 3, 5).size(), 4u);
  EXPECT_EQ(read_json(o.out + "/manifest.json")["separator"]["token"], "[SEP]");
}

TEST_F(PrepareLm, NoHeldOutDocumentIsAnError) {
  PrepareLmOptions o = opts(0.05);  // k = 20 > 8 addresses
  o.sources = {"sotu"};
  EXPECT_EQ(error_kind_of([&] { prepare_lm(o, gpt2_); }), ErrorKind::data);
  EXPECT_THAT(error_of([&] { prepare_lm(o, gpt2_); }), HasSubstr("no document is held out"));
  EXPECT_FALSE(fs::exists(o.out));
  EXPECT_TRUE(fs::is_empty(path("out")));  // no temporary left behind
}

TEST_F(PrepareLm, BadOptionsAreConfigErrors) {
  PrepareLmOptions o = opts();
  o.sources = {"sotu", "bible"};
  EXPECT_THAT(error_of([&] { prepare_lm(o, gpt2_); }), HasSubstr("unknown source 'bible'"));
  o = opts(0.6);
  EXPECT_EQ(error_kind_of([&] { prepare_lm(o, gpt2_); }), ErrorKind::config);
  o = opts(0.0);
  EXPECT_EQ(error_kind_of([&] { prepare_lm(o, gpt2_); }), ErrorKind::config);
}

TEST_F(PrepareLm, AFailingRunLeavesTheEarlierOutputWhole) {
  PrepareLmOptions o = opts();
  prepare_lm(o, gpt2_);
  const auto before = read_token_shard(o.out + "/train_000000.bin");
  std::ofstream(o.data_dir + "/sotu/1799_bad_d.txt") << "bad \xFF byte";  // the tokenizer refuses it
  EXPECT_EQ(error_kind_of([&] { prepare_lm(o, gpt2_); }), ErrorKind::data);
  EXPECT_THAT(error_of([&] { prepare_lm(o, gpt2_); }),
              HasSubstr("sotu/1799_bad_d.txt: [fake] invalid byte at offset 4"));
  EXPECT_EQ(read_token_shard(o.out + "/train_000000.bin"), before);
  EXPECT_EQ(std::distance(fs::directory_iterator(path("out")), fs::directory_iterator()), 1);
  // A successful run replaces it whole.
  fs::remove(o.data_dir + "/sotu/1799_bad_d.txt");
  fs::remove(o.data_dir + "/sotu/1790_a_d.txt");
  prepare_lm(o, gpt2_);
  EXPECT_EQ(read_json(o.out + "/manifest.json")["inputs"].size(), 9u);
  EXPECT_EQ(std::distance(fs::directory_iterator(path("out")), fs::directory_iterator()), 1);
}

TEST_F(PrepareLm, AFolderNotWrittenByPrepareIsNeverReplaced) {
  PrepareLmOptions o = opts();
  fs::create_directories(o.out);
  std::ofstream(o.out + "/precious.txt") << "keep me";
  EXPECT_THAT(error_of([&] { prepare_lm(o, gpt2_); }), HasSubstr("was not written by zerotrain prepare"));
  EXPECT_TRUE(fs::exists(o.out + "/precious.txt"));
  std::ofstream(o.out + "/manifest.json") << R"({"writer": "someone else"})";
  EXPECT_THROW(prepare_lm(o, gpt2_), Error);
  fs::remove_all(o.out);
  std::ofstream(o.out) << "a file";
  EXPECT_THAT(error_of([&] { prepare_lm(o, gpt2_); }), HasSubstr("exists and is not a folder"));
  fs::remove(o.out);
  fs::create_directories(o.out);  // empty: fine
  EXPECT_NO_THROW(prepare_lm(o, gpt2_));
}

// Note [output folders]: the next run on an --out removes the temporaries of interrupted runs
// (their pid gone, their lock free) and says so; a live run's, a locked one's (another host's or
// namespace's run) and another destination's are left.
TEST_F(PrepareLm, TemporariesOfInterruptedRunsAreRemovedByTheNextRun) {
  PrepareLmOptions o = opts();
  const pid_t gone = ::fork();
  if (gone == 0) ::_exit(0);
  ASSERT_GT(gone, 0);
  ASSERT_EQ(::waitpid(gone, nullptr, 0), gone);
  const std::string dead = o.out + ".tmp." + std::to_string(gone) + ".0123456789abcdef",
                    live = o.out + ".tmp." + std::to_string(::getpid()) + ".0123456789abcdef",
                    locked = o.out + ".tmp." + std::to_string(gone) + ".00000000000000aa",
                    other = o.out + "2.tmp." + std::to_string(gone) + ".0123456789abcdef";
  for (const std::string& t : {dead, live, locked, other}) {
    fs::create_directories(t);
    std::ofstream(t + "/train_000000.bin") << "half written";
  }
  const int fd = ::open(locked.c_str(), O_RDONLY | O_DIRECTORY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_SH), 0);
  std::vector<std::string> lines;
  prepare_lm(o, gpt2_, [&](const std::string& l) { lines.push_back(l); });
  ::close(fd);
  EXPECT_FALSE(fs::exists(dead));
  for (const std::string& t : {live, locked, other}) EXPECT_TRUE(fs::exists(t + "/train_000000.bin")) << t;
  EXPECT_THAT(lines, ::testing::Contains("removed 1 temporaries of interrupted runs beside --out " + o.out +
                                         " (their processes are gone): " + dead));
}

class PrepareCls : public testing_util::TempDirTest {
 protected:
  PrepareClsOptions opts(int max_len = 64) {
    PrepareClsOptions o;
    o.data_dir = write_fake_corpus(path("data"), kNames, 9, /*moby=*/false);
    o.out = path("party");
    o.max_len = max_len;
    return o;
  }
  ByteTokenizer bert_{true};
};

TEST_F(PrepareCls, WholeAddressesSplitByYearAndOtherPartiesDropped) {
  const PrepareClsOptions o = opts();
  const PrepareClsReport r = prepare_sotu_party(o, bert_);
  // Years 1790, 1795, 1800 (multiples of 5) are test; 1793 (w) is dropped.
  EXPECT_EQ(r.test_addresses, 3);
  EXPECT_EQ(r.train_addresses, 4);
  EXPECT_EQ(r.dropped_addresses, 1);
  // 9 sentences of 12 words -> passages of up to (64 - 2) * 2 / 3 = 41 words: 3 of 36 words each.
  EXPECT_EQ(r.train_counts, (std::vector<int64_t>{0, 12}));  // 1791 r, 1792 r, 1796 r, 1801 r
  EXPECT_EQ(r.test_counts, (std::vector<int64_t>{9, 0}));    // 1790 d, 1795 d, 1800 d
  EXPECT_EQ(r.majority_class, 1);
  EXPECT_DOUBLE_EQ(r.majority_test_accuracy, 0.0);
  EXPECT_EQ(r.truncated, 9 + 12);  // 36 words are far more than 62 bytes

  const SeqClsSet test = read_seq_cls(o.out + "/test.bin");
  ASSERT_EQ(test.size(), 9);
  EXPECT_EQ(test.max_len, 64);
  EXPECT_EQ(test.length(0), 64);
  EXPECT_EQ(test.tokens[0], 2);   // [CLS]
  EXPECT_EQ(test.tokens[63], 3);  // [SEP]
  EXPECT_EQ(ByteTokenizer(true).decode({test.tokens.begin() + 1, test.tokens.begin() + 11}), "Address 0 ");
  const auto m = read_json(o.out + "/manifest.json");
  EXPECT_EQ(m["task"], "sotu-party");
  EXPECT_EQ(m["classes"][1], "Republican");
  EXPECT_EQ(m["records"]["test"], 9);
}

TEST_F(PrepareCls, ShortPassagesAreNotTruncated) {
  PrepareClsOptions o = opts(512);
  const PrepareClsReport r = prepare_sotu_party(o, bert_);
  EXPECT_EQ(r.truncated, 0);
  const SeqClsSet train = read_seq_cls(o.out + "/train.bin");
  // 9 sentences of 12 words fit one passage (max 340 words); each address is one record.
  ASSERT_EQ(train.size(), 4);
  EXPECT_LT(train.length(0), 512);
  EXPECT_EQ(train.tokens[size_t(train.offsets[1] - 1)], 3);
}

TEST_F(PrepareCls, Gpt2CannotDoClassificationAndAnEmptySplitIsAnError) {
  PrepareClsOptions o = opts();
  EXPECT_THAT(error_of([&] { prepare_sotu_party(o, ByteTokenizer(false)); }), HasSubstr("needs [CLS]"));
  o.test_year_multiple = 1000;  // no year is a multiple: no test split
  EXPECT_THAT(error_of([&] { prepare_sotu_party(o, bert_); }), HasSubstr("the test split 0"));
  EXPECT_FALSE(fs::exists(o.out));
  o = opts(4);
  EXPECT_EQ(error_kind_of([&] { prepare_sotu_party(o, bert_); }), ErrorKind::config);
}

}  // namespace
}  // namespace zt::data
