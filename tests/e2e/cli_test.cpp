// The command line as a user meets it: help and exit codes, one-line errors for bad input,
// training on real MNIST at every stage under mpirun, estimate == measured memory, eval of the
// saved weights, fault injection ending the job, and nothing saved lost to a failing run.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

namespace fs = std::filesystem;

namespace {

struct Result {
  int code;
  std::string out;  // stdout + stderr
};

Result run(const std::string& cmd) {
  std::string full = "cd " ZT_SOURCE_DIR " && " + cmd + " 2>&1";
  FILE* p = popen(full.c_str(), "r");
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int st = pclose(p);
  return {WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st), out};
}

const std::string kBin = ZT_BIN;
const std::string kMpi = std::string(ZT_MPIRUN) + " -np ";
const std::string kConfig = " --config configs/mnist_mlp.json";

bool have_mnist() { return fs::exists(fs::path(ZT_SOURCE_DIR) / "data/mnist/t10k-labels-idx1-ubyte"); }

std::string tmpdir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("zt_e2e_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d.string();
}

std::string write_file(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
  return path;
}

nlohmann::json read_json(const std::string& path) {
  std::ifstream f(path);
  return nlohmann::json::parse(f);
}

std::vector<nlohmann::json> read_jsonl(const std::string& path) {
  std::ifstream f(path);
  std::vector<nlohmann::json> out;
  for (std::string line; std::getline(f, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

int count_lines(const std::string& s) { return int(std::count(s.begin(), s.end(), '\n')); }

TEST(Cli, HelpAndUsageErrors) {
  Result h = run(kBin + " --help");
  EXPECT_EQ(h.code, 0);
  EXPECT_NE(h.out.find("usage: zerotrain"), std::string::npos);
  Result u = run(kBin + " frobnicate");
  EXPECT_EQ(u.code, 2);
  EXPECT_NE(u.out.find("unknown command 'frobnicate'"), std::string::npos);
  EXPECT_EQ(run(kBin + " train").code, 2);  // no --config
  EXPECT_EQ(run(kBin).code, 2);
}

TEST(Cli, ConfigErrorsAreOneLineNamingTheKey) {
  Result r = run(kBin + " train" + kConfig + " zero_optimization.stagee=2");
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(count_lines(r.out), 1) << r.out;
  EXPECT_NE(r.out.find("stagee"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("did you mean 'zero_optimization.stage'"), std::string::npos) << r.out;
  Result range = run(kBin + " train" + kConfig + " zero_optimization.stage=5");
  EXPECT_EQ(range.code, 1);
  EXPECT_NE(range.out.find("stage"), std::string::npos) << range.out;
  Result missing = run(kBin + " train --config /nonexistent/ds.json");
  EXPECT_EQ(missing.code, 1);
  EXPECT_NE(missing.out.find("/nonexistent/ds.json"), std::string::npos) << missing.out;
}

TEST(Cli, ImpossibleWorldSizeNamesTheBatchValues) {
  Result r = run(kMpi + "3 " + kBin + " train" + kConfig + " train_micro_batch_size_per_gpu=32 run.dir=" +
                 tmpdir("world"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("train_batch_size 64"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("world size 3"), std::string::npos) << r.out;
}

TEST(Cli, TruncatedDataNamesTheFileAndNothingSavedIsLost) {
  if (!have_mnist()) GTEST_SKIP() << "MNIST not installed (scripts/setup.sh)";
  const std::string d = tmpdir("trunc"), data = d + "/mnist", out = d + "/run";
  fs::create_directories(data);
  fs::create_directories(out);
  for (auto f : {"train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"})
    fs::copy_file(fs::path(ZT_SOURCE_DIR) / "data/mnist" / f, fs::path(data) / f);
  fs::copy_file(fs::path(ZT_SOURCE_DIR) / "data/mnist/train-images-idx3-ubyte", fs::path(data) / "train-images-idx3-ubyte");
  fs::resize_file(fs::path(data) / "train-images-idx3-ubyte", 1000);
  write_file(out + "/model.safetensors", "precious");
  Result r = run(kBin + " train" + kConfig + " data.dir=" + data + " run.dir=" + out);
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(count_lines(r.out), 1) << r.out;
  EXPECT_NE(r.out.find("train-images-idx3-ubyte"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1000"), std::string::npos) << r.out;  // the actual size
  std::ifstream f(out + "/model.safetensors");
  std::string kept((std::istreambuf_iterator<char>(f)), {});
  EXPECT_EQ(kept, "precious");
}

class StageRun : public ::testing::TestWithParam<int> {};

// A short run per stage on 2 ranks: metrics, summary, weights; memory equals `estimate`;
// `eval` of the saved weights reproduces the accuracy that training printed.
TEST_P(StageRun, TrainsEstimatesAndEvaluates) {
  if (!have_mnist()) GTEST_SKIP() << "MNIST not installed (scripts/setup.sh)";
  const int stage = GetParam();
  const std::string dir = tmpdir("stage" + std::to_string(stage));
  const std::string args = kConfig + " zero_optimization.stage=" + std::to_string(stage) +
                           " zero_optimization.stage3_param_persistence_threshold=0 data.train_limit=6400"
                           " data.test_limit=2000 run.max_steps=40 steps_per_print=20 run.dir=" + dir;
  Result t = run(kMpi + "2 " + kBin + " train" + args);
  ASSERT_EQ(t.code, 0) << t.out;
  EXPECT_NE(t.out.find("step 20/40"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("ETA"), std::string::npos);
  auto lines = read_jsonl(dir + "/metrics.jsonl");
  ASSERT_GE(lines.size(), 3u);
  const auto& last_step = lines[lines.size() - 2];
  EXPECT_EQ(last_step["step"], 40);
  EXPECT_LT(last_step["loss"].get<double>(), lines[1]["loss"].get<double>() + 1.0);
  auto summary = read_json(dir + "/summary.json");
  const double acc = summary["test_accuracy"];
  EXPECT_GT(acc, 0.5);

  Result e = run(kBin + " estimate" + args + " --world 2");
  ASSERT_EQ(e.code, 0) << e.out;
  auto js = nlohmann::json::parse(e.out.substr(e.out.find("json: ") + 6));
  const auto& row = js[stage];
  EXPECT_EQ(row["param"], last_step["memory"]["param"]) << e.out;
  EXPECT_EQ(row["grad"], last_step["memory"]["grad"]) << e.out;
  EXPECT_EQ(row["optim"], last_step["memory"]["optim"]) << e.out;

  Result ev = run(kBin + " eval" + args);
  ASSERT_EQ(ev.code, 0) << ev.out;
  char want[64];
  std::snprintf(want, sizeof want, "test accuracy: %.4f", acc);
  EXPECT_NE(ev.out.find(want), std::string::npos) << ev.out << " vs " << want;
}

INSTANTIATE_TEST_SUITE_P(Zero, StageRun, ::testing::Values(0, 1, 2, 3),
                         [](const auto& info) { return "stage" + std::to_string(info.param); });

TEST(Cli, StalledRankEndsTheJobWithTheCollectiveNamed) {
  if (!have_mnist()) GTEST_SKIP() << "MNIST not installed (scripts/setup.sh)";
  Result r = run("ZT_FAULT=stall:rank=1:step=3 " + kMpi + "2 " + kBin + " train" + kConfig +
                 " data.train_limit=6400 run.max_steps=10 run.comm_timeout_s=3 run.dir=" + tmpdir("stall"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("timed out after 3.0 s"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("step 3"), std::string::npos) << r.out;
  EXPECT_TRUE(r.out.find("reduce_scatter") != std::string::npos || r.out.find("all_reduce") != std::string::npos ||
              r.out.find("all_gather") != std::string::npos)
      << r.out;
}

TEST(Cli, ExitingRankEndsTheJobNonZero) {
  if (!have_mnist()) GTEST_SKIP() << "MNIST not installed (scripts/setup.sh)";
  Result r = run("ZT_FAULT=exit:rank=1:step=3 " + kMpi + "2 " + kBin + " train" + kConfig +
                 " data.train_limit=6400 run.max_steps=10 run.comm_timeout_s=10 run.dir=" + tmpdir("exit"));
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("fault injection: rank 1 exit at step 3"), std::string::npos) << r.out;
}

// The acceptance run: the README's main job, 2 epochs at stage 2 on 2 ranks, >= 97.5%.
TEST(Cli, MnistMlpReachesTargetAccuracy) {
  if (!have_mnist()) GTEST_SKIP() << "MNIST not installed (scripts/setup.sh)";
  const std::string dir = tmpdir("mnist");
  Result r = run(kMpi + "2 " + kBin + " train" + kConfig + " run.dir=" + dir);
  ASSERT_EQ(r.code, 0) << r.out;
  const double acc = read_json(dir + "/summary.json")["test_accuracy"];
  EXPECT_GE(acc, 0.975) << r.out;
}

}  // namespace
