// The language-model tools through the binary: plot (a PNG from metrics.jsonl via gnuplot),
// baseline (n-gram losses of token shards the test writes) and generate's errors that need no
// GPT model (generate_test.cpp runs it on one).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <fstream>

#include "e2e_util.h"

namespace {

using namespace zt::e2e;

const std::string kBin = zt::testing::shell_word(ZT_BIN);  // a shell word wherever the clone lives

bool have_gnuplot() { return std::system("command -v gnuplot >/dev/null 2>&1") == 0; }

bool is_png(const std::string& path) { return slurp(path).rfind("\x89PNG\r\n\x1a\n", 0) == 0; }

std::vector<std::string> files_in(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

// metrics.jsonl as train.cpp writes it, plus validation records.
std::string metrics_text() {
  std::string s = R"({"event":"start","world_size":1,"total_steps":40,"config":{}})"
                  "\n";
  for (int step = 1; step <= 40; ++step) {
    s += R"({"step":)" + std::to_string(step) + R"(,"loss":)" + std::to_string(3.0 / std::sqrt(step)) + "}\n";
    if (step % 10 == 0)
      s += R"({"step":)" + std::to_string(step) + R"(,"val_loss":)" + std::to_string(3.2 / std::sqrt(step)) + "}\n";
  }
  return s + R"({"event":"final","summary":{"steps":40}})"
             "\n";
}

TEST(Plot, DrawsTrainAndValidationLossIntoRunDirLossPng) {
  if (!have_gnuplot()) GTEST_SKIP() << "gnuplot is not installed (Debian gnuplot-nox; scripts/setup.sh)";
  const std::string dir = tmpdir("plot_default");
  write_file(dir + "/metrics.jsonl", metrics_text());
  const Result r = run(kBin + " plot " + dir, 60);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(is_png(dir + "/loss.png"));
  EXPECT_GT(fs::file_size(dir + "/loss.png"), 1000u);
  EXPECT_NE(r.out.find("40 train, 4 validation points"), std::string::npos) << r.out;
  EXPECT_EQ(files_in(dir), (std::vector<std::string>{"loss.png", "metrics.jsonl"}));  // no temporaries left
}

TEST(Plot, OutChoosesTheFileAndATrainOnlyOrValidationOnlyRunPlots) {
  if (!have_gnuplot()) GTEST_SKIP() << "gnuplot is not installed (Debian gnuplot-nox; scripts/setup.sh)";
  const std::string dir = tmpdir("plot_out");
  write_file(dir + "/metrics.jsonl", R"({"step":5,"loss":2.5})"
                                     "\n");  // one point
  Result r = run(kBin + " plot " + dir + " --out " + dir + "/curve.png", 60);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(is_png(dir + "/curve.png"));
  EXPECT_FALSE(fs::exists(dir + "/loss.png"));
  write_file(dir + "/metrics.jsonl", R"({"step":5,"val_loss":2.5})"
                                     "\n"
                                     R"({"step":9,"val_loss":2.1})"
                                     "\n");
  r = run(kBin + " plot " + dir, 60);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(is_png(dir + "/loss.png"));
  EXPECT_NE(r.out.find("0 train, 2 validation points"), std::string::npos) << r.out;
}

TEST(Plot, ResumedRunsAndTornLinesPlot) {
  if (!have_gnuplot()) GTEST_SKIP() << "gnuplot is not installed (Debian gnuplot-nox; scripts/setup.sh)";
  const std::string dir = tmpdir("plot_resumed");
  write_file(dir + "/metrics.jsonl", R"({"event":"start"})"
                                     "\n"
                                     R"({"step":1,"loss":3})"
                                     "\n"
                                     R"({"step":2,"loss":2.5})"
                                     "\n"
                                     R"({"step":3,"loss":2.4})"
                                     "\n"
                                     R"({"event":"start"})"
                                     "\n"
                                     R"({"step":3,"loss":2.2})"
                                     "\n"
                                     R"({"step":4,"lo)");  // killed mid-line
  const Result r = run(kBin + " plot " + dir, 60);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(is_png(dir + "/loss.png"));
  EXPECT_NE(r.out.find("3 train, 0 validation points; 2 runs"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("skipped 1 line"), std::string::npos) << r.out;
}

TEST(Plot, ErrorsAreOneLineAndLeaveAnEarlierPngAlone) {
  const std::string dir = tmpdir("plot_errors");
  Result r = run(kBin + " plot " + dir);
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(count_lines(r.out), 1) << r.out;
  EXPECT_NE(r.out.find("no metrics file " + dir + "/metrics.jsonl"), std::string::npos) << r.out;

  write_file(dir + "/metrics.jsonl", R"({"event":"start"})"
                                     "\n"
                                     R"({"step":3,"lr":0.1})"
                                     "\n");
  r = run(kBin + " plot " + dir);
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(count_lines(r.out), 1) << r.out;
  EXPECT_NE(r.out.find("has no loss records"), std::string::npos) << r.out;

  // Without gnuplot on PATH: the package to install, and the earlier loss.png unchanged.
  write_file(dir + "/metrics.jsonl", metrics_text());
  write_file(dir + "/loss.png", "earlier");
  r = run("env PATH=/nonexistent " + kBin + " plot " + dir);
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(count_lines(r.out), 1) << r.out;
  EXPECT_NE(r.out.find("gnuplot is not installed"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("gnuplot-nox"), std::string::npos) << r.out;
  EXPECT_EQ(slurp(dir + "/loss.png"), "earlier");
  EXPECT_EQ(files_in(dir), (std::vector<std::string>{"loss.png", "metrics.jsonl"}));

  r = run(kBin + " plot");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("RUN_DIR"), std::string::npos) << r.out;
  r = run(kBin + " plot " + dir + " --out " + dir + "/no/such/folder/x.png");
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(count_lines(r.out), 1) << r.out;
}

// A stand-in gnuplot first on PATH: one that fails, one that succeeds without drawing.
TEST(Plot, AFailingGnuplotIsOneLineWithItsMessage) {
  const std::string dir = tmpdir("plot_fake_gnuplot"), bin = dir + "/bin";
  fs::create_directories(bin);
  write_file(dir + "/metrics.jsonl", metrics_text());
  const std::string gnuplot = bin + "/gnuplot", path = "env PATH=" + bin + ":/usr/bin:/bin ";
  write_file(gnuplot,
             "#!/bin/sh\necho 'line 1: something'\necho '        ^'\necho 'line 7: no such terminal' >&2\nexit 1\n");
  fs::permissions(gnuplot, fs::perms::owner_all);
  Result r = run(path + kBin + " plot " + dir);
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(count_lines(r.out), 1) << r.out;
  EXPECT_NE(r.out.find("gnuplot failed (exit status 1): line 7: no such terminal"), std::string::npos) << r.out;
  write_file(gnuplot, "#!/bin/sh\nexit 0\n");
  r = run(path + kBin + " plot " + dir);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("gnuplot wrote no PNG"), std::string::npos) << r.out;
  EXPECT_EQ(files_in(dir), (std::vector<std::string>{"bin", "metrics.jsonl"}));  // no temporaries left
}

// A token shard in llm.c's format: 256 int32 header (magic, version, count), uint16 tokens.
void write_shard(const std::string& path, const std::vector<uint16_t>& tokens) {
  std::vector<int32_t> header(256, 0);
  header[0] = 20240520;
  header[1] = 1;
  header[2] = int32_t(tokens.size());
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(header.data()), 1024);
  f.write(reinterpret_cast<const char*>(tokens.data()), std::streamsize(tokens.size() * 2));
}

TEST(Baseline, ReadsEveryShardAndWritesTheLossesToBaselineJson) {
  // tests/data/test_ngram.cpp's SeenHeldOutBigrams case, its train tokens split over two shards.
  const std::string dir = tmpdir("baseline");
  write_shard(dir + "/train_000001.bin", {0, 1, 0, 1, 0, 1});
  write_shard(dir + "/train_000000.bin", {0, 1, 0, 1});  // name order, not listing order
  write_shard(dir + "/val_000000.bin", {1, 0, 2, 0});
  write_file(dir + "/notes_train.txt", "not a shard");
  const Result r = run(kBin + " baseline --data " + dir + " --vocab 3", 60);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("train: 10 tokens in 2 shards; validation: 4 tokens in 1 shard"), std::string::npos) << r.out;
  const nlohmann::json j = read_json(dir + "/baseline.json");
  const double u0 = 6.0 / 13, u2 = 1.0 / 13, l = 0.99;
  EXPECT_DOUBLE_EQ(j["lambda"].get<double>(), 0.99);
  EXPECT_DOUBLE_EQ(j["unigram_loss"].get<double>(), -(3 * std::log(u0) + std::log(u2)) / 4);
  EXPECT_NEAR(j["bigram_loss"].get<double>(),
              -(std::log(u0) + std::log(l + (1 - l) * u0) + std::log((1 - l) * u2) + std::log(u0)) / 4, 1e-12);
  EXPECT_EQ(j["train_tokens"], 10);
  EXPECT_EQ(j["val_tokens"], 4);
  EXPECT_EQ(j["vocab_size"], 3);
  char printed[32];
  std::snprintf(printed, sizeof printed, "%.4f nats/token", j["unigram_loss"].get<double>());
  EXPECT_NE(r.out.find(printed), std::string::npos) << r.out;
}

TEST(Baseline, ErrorsAreOneLineNamingTheProblem) {
  const std::string dir = tmpdir("baseline_errors");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {" --data " + dir + "/absent", "is not a folder of token shards"},
      {" --data " + dir, "no train_*.bin token shards in " + dir},
  };
  for (const auto& [args, want] : cases) {
    const Result r = run(kBin + " baseline" + args);
    EXPECT_EQ(r.code, 1) << args;
    EXPECT_EQ(count_lines(r.out), 1) << r.out;
    EXPECT_NE(r.out.find(want), std::string::npos) << r.out;
  }
  write_shard(dir + "/train_0.bin", {0, 1, 2});
  Result r = run(kBin + " baseline --data " + dir);
  EXPECT_NE(r.out.find("no val_*.bin token shards"), std::string::npos) << r.out;
  write_shard(dir + "/val_0.bin", {0, 7});
  r = run(kBin + " baseline --data " + dir + " --vocab 5");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("validation token 7 at position 1 is not below the vocabulary size 5"), std::string::npos)
      << r.out;
  EXPECT_FALSE(fs::exists(dir + "/baseline.json"));
  for (const char* bad : {" --vocab 0", " --vocab 16777217", " --vocab x", ""}) {
    r = run(kBin + " baseline" + (std::string(bad).empty() ? "" : " --data " + dir + bad));
    EXPECT_EQ(r.code, 2) << bad << ": " << r.out;
    EXPECT_EQ(count_lines(r.out), 1) << r.out;
  }
}

// The same in version 2 (uint32 tokens, llm.c's format for vocabularies past 65,536 ids).
void write_shard32(const std::string& path, const std::vector<uint32_t>& tokens) {
  std::vector<int32_t> header(256, 0);
  header[0] = 20240520;
  header[1] = 2;
  header[2] = int32_t(tokens.size());
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(header.data()), 1024);
  f.write(reinterpret_cast<const char*>(tokens.data()), std::streamsize(tokens.size() * 4));
}

// Issue 54: data.train_files / data.val_files globs over shards of both versions train exactly
// as the same tokens in one version 1 shard per split under data.dir (the windows are the same).
TEST(TokenData, GlobbedShardsOfBothVersionsTrainAsOneFolder) {
  const std::string dir = tmpdir("token_globs");
  std::vector<uint16_t> train(3000), val(600);
  for (size_t i = 0; i < train.size(); ++i) train[i] = uint16_t((i * 37 + i / 7) % 256);
  for (size_t i = 0; i < val.size(); ++i) val[i] = uint16_t((i * 11 + 5) % 256);
  fs::create_directories(dir + "/one");
  write_shard(dir + "/one/train_000000.bin", train);
  write_shard(dir + "/one/val_000000.bin", val);
  // The train split as v1, v2, v1 pieces (cut mid-window), the validation split as v2.
  write_shard(dir + "/fw_train_000000.bin", {train.begin(), train.begin() + 1000});
  write_shard32(dir + "/fw_train_000001.bin", {train.begin() + 1000, train.begin() + 2001});
  write_shard(dir + "/fw_train_000002.bin", {train.begin() + 2001, train.end()});
  write_shard32(dir + "/fw_val_000000.bin", {val.begin(), val.end()});
  const std::string gpt = kBin +
                          " train --config configs/gpt_sotu.json model.vocab_size=256 model.n_layer=1 model.n_embd=32"
                          " model.n_head=2 model.block_size=16 train_batch_size=4 train_micro_batch_size_per_gpu=4"
                          " bf16.enabled=false run.max_steps=3 run.threads=1 steps_per_print=1";
  const Result one = run(gpt + " data.dir=" + dir + "/one run.dir=" + dir + "/run_one", 120);
  ASSERT_EQ(one.code, 0) << one.out;
  const Result globs = run(gpt + " 'data.train_files=" + dir + "/fw_train_*.bin' 'data.val_files=" + dir +
                               "/fw_val_*.bin' data.dir=" + dir + "/absent run.dir=" + dir + "/run_globs",
                           120);
  ASSERT_EQ(globs.code, 0) << globs.out;
  EXPECT_EQ(logged_losses(dir + "/run_globs"), logged_losses(dir + "/run_one"));
  EXPECT_EQ(logged_losses(dir + "/run_one").size(), 3u);

  // A pattern that matches nothing names its key; a token past the vocabulary its file and offset.
  const Result none = run(gpt + " 'data.train_files=" + dir + "/nope_*.bin' run.dir=" + dir + "/run_none", 60);
  EXPECT_EQ(none.code, 1);
  EXPECT_EQ(count_lines(none.out), 1) << none.out;
  EXPECT_NE(none.out.find("'data.train_files' pattern '" + dir + "/nope_*.bin' matches no file"), std::string::npos)
      << none.out;
  write_shard32(dir + "/fw_val_000000.bin", {1, 2, 256, 3});
  const Result bad = run(gpt + " 'data.train_files=" + dir + "/fw_train_*.bin' 'data.val_files=" + dir +
                             "/fw_val_*.bin' run.dir=" + dir + "/run_bad",
                         60);
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.out.find(dir + "/fw_val_000000.bin: token 2 (byte offset 1032) is 256, outside the vocabulary of 256"),
            std::string::npos)
      << bad.out;
}

TEST(Generate, UsageAndConfigErrorsNeedNoModel) {
  const std::string cfg = " --config configs/mnist_mlp.json";
  const std::vector<std::pair<std::string, std::string>> usage = {
      {cfg + " --prompt hi", "--weights is required"},
      {cfg + " --weights w --temperature -1", "'-1' is not a number >= 0"},
      {cfg + " --weights w --temperature inf", "'inf' is not a number >= 0"},
      {cfg + " --weights w --top-k -2", "'-2' is not an integer in [0, 9223372036854775807]"},
      {cfg + " --weights w --tokens x", "'x' is not an integer in [0, 1000000]"},
  };
  for (const auto& [args, want] : usage) {
    const Result r = run(kBin + " generate" + args);
    EXPECT_EQ(r.code, 2) << args << ": " << r.out;
    EXPECT_EQ(count_lines(r.out), 1) << r.out;
    EXPECT_NE(r.out.find(want), std::string::npos) << r.out;
  }
  // Valid values pass the parser and reach the configuration's check.
  const Result r = run(kBin + " generate" + cfg +
                       " --weights w.safetensors --prompt hi --tokens 5 --top-k 3 --temperature 0.5 --seed 7");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_EQ(count_lines(r.out), 1) << r.out;
  EXPECT_NE(r.out.find("model.type 'mlp' is not a language model"), std::string::npos) << r.out;
}

TEST(LmTools, HelpNamesEveryOption) {
  const std::vector<std::pair<std::string, std::vector<std::string>>> want = {
      {"plot", {"RUN_DIR", "--out"}},
      {"baseline", {"--data", "--vocab"}},
      {"generate",
       {"--config", "--weights", "--prompt", "--tokens", "--temperature", "--top-k", "--seed", "--tokenizer-dir"}}};
  for (const auto& [cmd, options] : want) {
    const Result r = run(kBin + " " + cmd + " --help");
    EXPECT_EQ(r.code, 0) << r.out;
    for (const auto& o : options) EXPECT_NE(r.out.find(o), std::string::npos) << cmd << " lacks " << o;
  }
  EXPECT_NE(run(kBin + " --help").out.find("generate"), std::string::npos);
}

}  // namespace
