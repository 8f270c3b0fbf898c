// Hostile input files as a user meets them through the binary: eval of weights that are a FIFO,
// of an integer dtype or nested deeper than the format, and an empty test set. Each must end
// with exit 1 and one line, quickly; the data is made here, so MNIST is not needed.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "e2e_util.h"

namespace fs = std::filesystem;

namespace {

using namespace zt::e2e;

Result run30(const std::string& cmd) { return run(cmd, 30); }

const std::string kBin = zt::testing::shell_word(ZT_BIN);  // a shell word wherever the clone lives
const std::string kConfig = " --config configs/mnist_mlp.json";

void write_bytes(const std::string& path, const std::string& bytes) { std::ofstream(path, std::ios::binary) << bytes; }

// A raw IDX file: big-endian magic and dims, then the uint8 payload.
void write_idx(const std::string& path, uint32_t magic, const std::vector<uint32_t>& dims, size_t items) {
  std::string b;
  auto put = [&](uint32_t v) {
    for (int s = 24; s >= 0; s -= 8) b.push_back(char(uint8_t(v >> s)));
  };
  put(magic);
  for (uint32_t d : dims) put(d);
  for (size_t i = 0; i < items; ++i) b.push_back(char(i % 10));  // labels 0..9; pixels alike
  write_bytes(path, b);
}

// n MNIST-shaped samples of the given split in dir.
void write_split(const std::string& dir, const std::string& prefix, uint32_t n) {
  write_idx(dir + "/" + prefix + "-images-idx3-ubyte", 0x803, {n, 28, 28}, size_t(n) * 784);
  write_idx(dir + "/" + prefix + "-labels-idx1-ubyte", 0x801, {n}, n);
}

void expect_one_line_error(const Result& r, const std::string& says) {
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
  EXPECT_NE(r.out.find(says), std::string::npos) << r.out;
}

class EvalHostile : public ::testing::Test {
 protected:
  // Weights from one training step on made-up data, once for the suite.
  static void SetUpTestSuite() {
    dir_ = tmpdir("eval_hostile_" + std::to_string(getpid()));  // ctest runs each test in its own process
    fs::create_directories(dir_ + "/data");
    write_split(dir_ + "/data", "train", 64);
    write_split(dir_ + "/data", "t10k", 10);
    const Result r = run30(kBin + " train" + kConfig + " data.dir=" + dir_ + "/data run.dir=" + dir_ +
                           "/run run.max_steps=1 run.eval_at_end=false");
    ASSERT_EQ(r.code, 0) << r.out;
    weights_ = dir_ + "/run/model.safetensors";
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }
  static Result eval(const std::string& weights, const std::string& data = dir_ + "/data") {
    return run30(kBin + " eval" + kConfig + " data.dir=" + data + " --weights " + weights);
  }
  static std::string dir_, weights_;
};
std::string EvalHostile::dir_, EvalHostile::weights_;

TEST_F(EvalHostile, TheTrainedWeightsEvaluate) {
  const Result r = eval(weights_);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("test accuracy: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("/10)"), std::string::npos) << r.out;
}

// `eval --weights FIFO` blocked in open.
TEST_F(EvalHostile, WeightsThatAreAFifoAreRefused) {
  const std::string fifo = dir_ + "/fifo.safetensors";
  fs::remove(fifo);
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  expect_one_line_error(eval(fifo), fifo + " is a FIFO, not a regular file");
  expect_one_line_error(eval(dir_), dir_ + " is a directory, not a regular file");
}

// The same bytes with the first tensor's dtype F32 -> I32 were loaded as weights.
TEST_F(EvalHostile, IntegerWeightsAreRefusedNamingTheTensor) {
  std::string bytes = slurp(weights_);
  const size_t at = bytes.find("\"F32\"");
  ASSERT_NE(at, std::string::npos);
  bytes.replace(at, 5, "\"I32\"");
  write_bytes(dir_ + "/int.safetensors", bytes);
  expect_one_line_error(eval(dir_ + "/int.safetensors"), "' has dtype I32; weights must be F32, BF16 or F16");
}

// A recursive dump of this metadata overflowed the stack.
TEST_F(EvalHostile, DeeplyNestedMetadataIsRefused) {
  const size_t levels = 100000;
  std::string header = R"({"__metadata__": {"a": )" + std::string(levels, '[') + std::string(levels, ']') + "}}";
  const uint64_t n = header.size();
  write_bytes(dir_ + "/deep.safetensors", std::string(reinterpret_cast<const char*>(&n), 8) + header);
  expect_one_line_error(eval(dir_ + "/deep.safetensors"), "nests deeper than the format's 3 levels");
}

// It printed "test accuracy: 0.0000 (0/0)" and exited 0.
TEST_F(EvalHostile, AnEmptyTestSetIsAnError) {
  const std::string empty = dir_ + "/empty";
  fs::create_directories(empty);
  write_split(empty, "t10k", 0);
  expect_one_line_error(eval(weights_, empty), "the test split in " + empty + " has no samples");
}

// The budget error named the model's remedies (offload, a higher stage) for data it could not hold.
TEST(TrainHostile, ABudgetSmallerThanTheDataSaysWhatTheDataNeeds) {
  const std::string dir = tmpdir("budget_" + std::to_string(getpid()));
  write_split(dir, "train", 3000);  // 3000 * 784 * 4 + 3000 * 4 = 9420000 bytes > 8 MiB
  write_split(dir, "t10k", 10);
  const std::string args =
      kConfig + " data.dir=" + dir + " run.dir=" + dir + "/run run.max_steps=1 run.memory_budget_mb=8";
  const Result r = run30(kBin + " train" + args);
  expect_one_line_error(r, "the train split in " + dir + " (3000 samples of 784 features) needs 8.98MiB");
  EXPECT_NE(r.out.find("memory budget of 8.00MiB"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("offload"), std::string::npos) << r.out;
  const Result fits = run30(kBin + " train" + args + " data.train_limit=128");  // the model and 128 samples fit
  EXPECT_EQ(fits.code, 0) << fits.out;
  fs::remove_all(dir);
}

}  // namespace
