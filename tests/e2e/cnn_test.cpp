// The CNN through the binary: a small one on a slice of Fashion-MNIST padded to 32x32 under
// mpirun at ZeRO stage 2 (then eval of its weights and estimate), and one on CIFAR-10 batches the
// test writes (no CIFAR-10 is installable offline).
#include <gtest/gtest.h>

#include <cctype>
#include <cstdint>
#include <string>

#include "e2e_util.h"

namespace {

using namespace zt::e2e;

const std::string kBin = zt::testing::shell_word(ZT_BIN);  // a shell word wherever the clone lives
const std::string kMpi = std::string(ZT_MPIRUN) + " -np ";

// The number after the first "test accuracy: ", or -1 (no std::regex: GCC 12 at -O1 warns inside it).
double accuracy_in(const std::string& out) {
  const std::string key = "test accuracy: ";
  const size_t at = out.find(key);
  if (at == std::string::npos || at + key.size() >= out.size() || !std::isdigit(uint8_t(out[at + key.size()])))
    return -1;
  return std::stod(out.substr(at + key.size()));
}

bool have_fashion() {
  return fs::exists(fs::path(ZT_SOURCE_DIR) / "data/fashion-mnist/t10k-labels-idx1-ubyte.gz") ||
         fs::exists(fs::path(ZT_SOURCE_DIR) / "data/fashion-mnist/t10k-labels-idx1-ubyte");
}

TEST(CnnE2e, SmallCnnLearnsFashionMnistAtStage2AndEvalAgrees) {
  if (!have_fashion()) GTEST_SKIP() << "no data/fashion-mnist (scripts/setup.sh fetches it)";
  const std::string dir = tmpdir("cnn_fashion");
  const std::string cfg =
      " --config configs/cnn_fashion.json model.channels=[8,16] model.fc=[64] bf16.enabled=false"
      " data.train_limit=6400 data.test_limit=1000 run.epochs=2 steps_per_print=25"
      " scheduler.params.warmup_num_steps=10 optimizer.params.lr=0.003 run.dir=" +
      dir;
  Result r = run(kMpi + "2 " + kBin + " train" + cfg, 600);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("stage 2, 2 ranks"), std::string::npos) << r.out;
  const double acc = accuracy_in(r.out);
  EXPECT_GE(acc, 0.70) << r.out;  // 0.78 here (2 epochs of 6400 images); the full config reaches > 0.91
  const nlohmann::json summary = read_json(dir + "/summary.json");
  EXPECT_DOUBLE_EQ(summary["test_accuracy"].get<double>(), acc);
  // The saved weights (features.N / classifier.N) give the same accuracy in eval.
  Result e = run(kBin + " eval" + cfg + " --weights " + dir + "/model.safetensors", 300);
  ASSERT_EQ(e.code, 0) << e.out;
  EXPECT_NEAR(accuracy_in(e.out), acc, 1e-9) << e.out;
  Result est = run(kBin + " estimate --config configs/cnn_fashion.json --world 2 --json", 60);
  ASSERT_EQ(est.code, 0) << est.out;
  EXPECT_EQ(nlohmann::json::parse(est.out)["parameters"].get<int64_t>(), 4575242);
}

// Records of label 0 are dark red, label 1 dark blue (plus noise): a CNN tells them apart at once.
void write_batch(const std::string& path, int n, uint32_t seed) {
  std::string b;
  for (int r = 0; r < n; ++r) {
    const int label = r % 2;
    b.push_back(char(label));
    for (int c = 0; c < 3; ++c)
      for (int p = 0; p < 1024; ++p) {
        seed = seed * 1664525u + 1013904223u;
        const int base = (c == 0 && label == 0) || (c == 2 && label == 1) ? 160 : 40;
        b.push_back(char(uint8_t(base + int(seed >> 27))));
      }
  }
  write_file(path, b);
}

TEST(CnnE2e, TrainsOnCifarBatchesAndPadsThem) {
  const std::string data = tmpdir("cnn_cifar_data"), dir = tmpdir("cnn_cifar_run");
  for (int f = 1; f <= 5; ++f) write_batch(data + "/data_batch_" + std::to_string(f) + ".bin", 32, uint32_t(f));
  write_batch(data + "/test_batch.bin", 40, 99u);
  const std::string cfg = " --config configs/cnn_fashion.json data.dataset=cifar10 data.dir=" + data +
                          " data.pad_to=36 model.in_channels=3 model.image_size=36 model.channels=[4,8]"
                          " model.fc=[16] train_batch_size=32 run.epochs=6 run.comm_backend=local"
                          " scheduler.params.warmup_num_steps=1 optimizer.params.lr=0.01 run.dir=" +
                          dir;
  Result r = run(kBin + " train" + cfg, 300);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_GE(accuracy_in(r.out), 0.9) << r.out;  // seeds 0-3, 7-9 and 42 all reach 40/40
  // A model that does not take the data's images is refused before anything runs.
  Result bad = run(kBin + " train" + cfg + " model.image_size=32", 60);
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.out.find("do not match the data: cifar10 gives 3 x 36 x 36 images"), std::string::npos) << bad.out;
}

}  // namespace
