// load_mnist on test-made files (raw and gzip), epoch_order, gather_batch, and real MNIST
// when scripts/setup.sh has fetched it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/error_of.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "idx_writer.h"
#include "zt/core/allocator.h"
#include "zt/core/error.h"
#include "zt/data/mnist.h"

namespace zt::data {
namespace {

using ::testing::HasSubstr;
using testing::idx_bytes;
using testing::write_file;

using zt::testing_util::error_kind_of;
using zt::testing_util::error_of;

class MnistTest : public testing::TempDirTest {
 protected:
  // n images of rows x cols with pixel (i, p) = (i * 31 + p) % 256, labels i % 10.
  void write_split(const std::string& prefix, uint32_t n, uint32_t rows, uint32_t cols, bool gz,
                   uint32_t n_labels = 0) {
    if (n_labels == 0) n_labels = n;
    std::vector<uint8_t> px(size_t(n) * rows * cols), lb(n_labels);
    for (size_t i = 0; i < n; ++i)
      for (size_t p = 0; p < size_t(rows) * cols; ++p) px[i * rows * cols + p] = uint8_t((i * 31 + p) % 256);
    for (size_t i = 0; i < n_labels; ++i) lb[i] = uint8_t(i % 10);
    std::string ext = gz ? ".gz" : "";
    write_file(path(prefix + "-images-idx3-ubyte" + ext), idx_bytes(0x803, {n, rows, cols}, px), gz);
    write_file(path(prefix + "-labels-idx1-ubyte" + ext), idx_bytes(0x801, {n_labels}, lb), gz);
  }
  static float norm(int v, float mean = 0.1307f, float sd = 0.3081f) { return (v / 255.0f - mean) / sd; }
};

TEST_F(MnistTest, LoadsRawTrainSplit) {
  write_split("train", 5, 2, 3, false);
  Dataset ds = load_mnist(dir_.string(), "train");
  ASSERT_EQ(ds.size(), 5);
  EXPECT_EQ(ds.images.shape(), (Shape{5, 6}));
  EXPECT_EQ(ds.images.dtype(), DType::f32);
  EXPECT_EQ(ds.labels.dtype(), DType::i32);
  const float* x = ds.images.data<float>();
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(ds.labels.data<int32_t>()[i], i % 10);
    for (int p = 0; p < 6; ++p) EXPECT_FLOAT_EQ(x[i * 6 + p], norm((i * 31 + p) % 256));
  }
}

TEST_F(MnistTest, LoadsGzipTestSplitWithCustomNormalisation) {
  write_split("t10k", 4, 3, 3, true);
  Dataset ds = load_mnist(dir_.string(), "test", 0.5f, 2.0f);
  ASSERT_EQ(ds.size(), 4);
  EXPECT_EQ(ds.images.shape(), (Shape{4, 9}));
  EXPECT_FLOAT_EQ(ds.images.data<float>()[9 * 3 + 4], norm((3 * 31 + 4) % 256, 0.5f, 2.0f));
}

// More pixels than one parallel chunk (65536), so the threaded path runs as well.
TEST_F(MnistTest, LargeSplitUsesEveryPixel) {
  write_split("train", 120, 28, 28, false);
  Dataset ds = load_mnist(dir_.string(), "train");
  ASSERT_EQ(ds.images.numel(), 120 * 784);
  const float* x = ds.images.data<float>();
  for (int64_t i = 0; i < 120; ++i)
    for (int64_t p = 0; p < 784; p += 97) ASSERT_FLOAT_EQ(x[i * 784 + p], norm(int((i * 31 + p) % 256)));
  EXPECT_FLOAT_EQ(x[120 * 784 - 1], norm(int((119 * 31 + 783) % 256)));
}

TEST_F(MnistTest, LimitKeepsFirstSamples) {
  write_split("train", 8, 2, 2, false);
  Dataset small = load_mnist(dir_.string(), "train", 0.1307f, 0.3081f, 3);
  ASSERT_EQ(small.size(), 3);
  EXPECT_EQ(small.images.shape(), (Shape{3, 4}));
  EXPECT_EQ(small.labels.data<int32_t>()[2], 2);
  Dataset all = load_mnist(dir_.string(), "train", 0.1307f, 0.3081f, 100);  // limit > n
  EXPECT_EQ(all.size(), 8);
}

TEST_F(MnistTest, CountMismatchNamesBothFiles) {
  write_split("train", 5, 2, 2, false, 4);
  std::string msg = error_of([&] { load_mnist(dir_.string(), "train"); });
  EXPECT_THAT(msg, HasSubstr(path("train-images-idx3-ubyte") + " has 5 images but " + path("train-labels-idx1-ubyte") +
                             " has 4 labels"));
}

TEST_F(MnistTest, LabelOutOfRangeNamesSampleAndOffset) {
  write_split("train", 3, 2, 2, false);
  write_file(path("train-labels-idx1-ubyte"), idx_bytes(0x801, {3}, {1, 12, 3}), false);
  std::string msg = error_of([&] { load_mnist(dir_.string(), "train"); });
  EXPECT_THAT(msg, HasSubstr("label 12 of sample 1 (byte offset 9) is outside 0..9"));
}

TEST_F(MnistTest, SwappedFilesAreRejected) {
  write_split("train", 3, 2, 2, false);
  std::filesystem::copy_file(path("train-labels-idx1-ubyte"), path("t10k-images-idx3-ubyte"));
  std::filesystem::copy_file(path("train-labels-idx1-ubyte"), path("t10k-labels-idx1-ubyte"));
  EXPECT_THAT(error_of([&] { load_mnist(dir_.string(), "test"); }),
              HasSubstr(path("t10k-images-idx3-ubyte") + ": expected an images file (3 dims), got 1 dim(s)"));
}

TEST_F(MnistTest, BadArguments) {
  write_split("train", 3, 2, 2, false);
  EXPECT_THAT(error_of([&] { load_mnist(dir_.string(), "valid"); }),
              HasSubstr("unknown split 'valid' (allowed: train, test)"));
  EXPECT_THAT(error_of([&] { load_mnist(dir_.string(), "train", 0.f, 0.f); }), HasSubstr("stddev"));
  EXPECT_THAT(error_of([&] { load_mnist(dir_.string(), "train", 0.1f, 0.3f, -1); }), HasSubstr("limit"));
  EXPECT_THAT(error_of([&] { load_mnist(dir_.string(), "test"); }),
              HasSubstr(path("t10k-images-idx3-ubyte") + ": no such file"));
}

// A split whose files hold no samples cannot be evaluated (it printed "0.0000 (0/0)").
TEST_F(MnistTest, AnEmptySplitIsADataError) {
  write_file(path("t10k-images-idx3-ubyte"), idx_bytes(0x803, {0, 28, 28}, {}), false);
  write_file(path("t10k-labels-idx1-ubyte"), idx_bytes(0x801, {0}, {}), false);
  EXPECT_EQ(error_kind_of([&] { load_mnist(dir_.string(), "test"); }), ErrorKind::data);
  EXPECT_THAT(error_of([&] { load_mnist(dir_.string(), "test", 0.1f, 0.3f, 5); }),
              HasSubstr("the test split in " + dir_.string() + " has no samples (" + path("t10k-labels-idx1-ubyte")));
  write_split("t10k", 1, 28, 28, false);
  EXPECT_EQ(load_mnist(dir_.string(), "test").size(), 1);
}

// A memory budget too small for the data says what the data needs, not how to shard the model.
TEST_F(MnistTest, ABudgetTooSmallForTheDataSaysWhatTheDataNeeds) {
  write_split("train", 100, 28, 28, false);  // 100 * 784 * 4 + 100 * 4 = 314000 bytes
  struct BudgetGuard {
    ~BudgetGuard() { Allocator::global().set_budget(0); }
  } guard;
  const size_t in_use = Allocator::global().stats().total_current;
  Allocator::global().set_budget(in_use + 200000);
  const std::string msg = error_of([&] { load_mnist(dir_.string(), "train"); });
  EXPECT_THAT(msg, HasSubstr("the train split in " + dir_.string() + " (100 samples of 784 features) needs 306.6KiB"));
  EXPECT_THAT(msg, HasSubstr("more than the memory budget of " + format_bytes(in_use + 200000) + " leaves"));
  EXPECT_THAT(msg, HasSubstr("data.train_limit"));
  EXPECT_THAT(msg, ::testing::Not(HasSubstr("offload")));
  EXPECT_EQ(error_kind_of([&] { load_mnist(dir_.string(), "train"); }), ErrorKind::out_of_memory);
  EXPECT_EQ(load_mnist(dir_.string(), "train", 0.1f, 0.3f, 50).size(), 50);  // half of it fits
  Allocator::global().set_budget(in_use + 400000);
  EXPECT_EQ(load_mnist(dir_.string(), "train").size(), 100);
}

TEST(EpochOrder, DeterministicPermutation) {
  for (int64_t n : {1, 2, 17, 1000}) {
    auto a = epoch_order(n, 42, 3, true);
    EXPECT_EQ(a, epoch_order(n, 42, 3, true));
    std::vector<int64_t> sorted = a;
    std::sort(sorted.begin(), sorted.end());
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(sorted[size_t(i)], i);
  }
  EXPECT_TRUE(epoch_order(0, 1, 0, true).empty());
}

TEST(EpochOrder, DependsOnSeedAndEpoch) {
  auto base = epoch_order(1000, 42, 0, true);
  EXPECT_NE(base, epoch_order(1000, 42, 1, true));
  EXPECT_NE(base, epoch_order(1000, 43, 0, true));
  std::vector<int64_t> identity(1000);
  for (int64_t i = 0; i < 1000; ++i) identity[size_t(i)] = i;
  EXPECT_NE(base, identity);
  std::set<std::vector<int64_t>> distinct;
  for (int64_t e = 0; e < 20; ++e) distinct.insert(epoch_order(50, 7, e, true));
  EXPECT_EQ(distinct.size(), 20u);
}

TEST(EpochOrder, NoShuffleIsIdentity) {
  auto order = epoch_order(5, 42, 9, false);
  EXPECT_EQ(order, (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_THROW(epoch_order(-1, 0, 0, true), Error);
}

TEST(GatherBatch, CopiesRowsAndLabels) {
  Dataset ds;
  std::vector<float> px(6 * 3);
  for (size_t i = 0; i < px.size(); ++i) px[i] = float(i);
  ds.images = Tensor::from_vector(px, {6, 3});
  ds.labels = Tensor::from_ints({0, 1, 2, 3, 4, 5}, {6});
  std::vector<int64_t> idx = {5, 0, 3, 3, 1};
  Batch b = gather_batch(ds, idx, 1, 4);  // rows 0, 3, 3
  EXPECT_EQ(b.x.shape(), (Shape{3, 3}));
  EXPECT_EQ(b.x.to_vector(), (std::vector<float>{0, 1, 2, 9, 10, 11, 9, 10, 11}));
  EXPECT_EQ(b.y.shape(), (Shape{3}));
  EXPECT_EQ(b.y.dtype(), DType::i32);
  EXPECT_EQ(b.y.to_vector(), (std::vector<float>{0, 3, 3}));
  // The copy is independent of the dataset.
  ds.images.data<float>()[0] = -1.f;
  EXPECT_EQ(b.x.data<float>()[0], 0.f);
  Batch empty = gather_batch(ds, idx, 2, 2);
  EXPECT_EQ(empty.x.shape(), (Shape{0, 3}));
}

TEST(GatherBatch, RejectsBadRangesAndIndices) {
  Dataset ds;
  ds.images = Tensor::zeros({4, 2});
  ds.labels = Tensor::from_ints({0, 1, 2, 3}, {4});
  std::vector<int64_t> idx = {0, 1, 4};
  EXPECT_THAT(error_of([&] { gather_batch(ds, idx, 0, 4); }), HasSubstr("range [0, 4) is outside the 3 indices"));
  EXPECT_THAT(error_of([&] { gather_batch(ds, idx, 2, 1); }), HasSubstr("range [2, 1)"));
  EXPECT_THAT(error_of([&] { gather_batch(ds, idx, 0, 3); }),
              HasSubstr("index 4 at position 2 is outside the dataset of 4 samples"));
  EXPECT_THROW(gather_batch(Dataset{}, idx, 0, 1), Error);
}

// Files that disagree are the user's data; arguments a caller got wrong are misuse.
TEST_F(MnistTest, BadFilesAreDataErrorsAndBadArgumentsAreMisuse) {
  write_split("train", 4, 2, 2, false, /*n_labels=*/3);
  EXPECT_EQ(error_kind_of([&] { load_mnist(dir_.string(), "train", 0.f, 1.f); }), ErrorKind::data);
  write_split("t10k", 4, 2, 2, false);
  EXPECT_NO_THROW(load_mnist(dir_.string(), "test", 0.f, 1.f));
  EXPECT_EQ(error_kind_of([&] { load_mnist(dir_.string(), "valid", 0.f, 1.f); }), ErrorKind::invalid_argument);
  write_file(path("t10k-labels-idx1-ubyte"), idx_bytes(0x801, {4}, {0, 1, 12, 3}), false);  // label 12
  EXPECT_EQ(error_kind_of([&] { load_mnist(dir_.string(), "test", 0.f, 1.f); }), ErrorKind::data);

  Dataset ds;
  ds.images = Tensor::zeros({4, 2});
  ds.labels = Tensor::from_ints({0, 1, 2, 3}, {4});
  std::vector<int64_t> idx = {0, 1, 4};
  EXPECT_EQ(error_kind_of([&] { gather_batch(ds, idx, 0, 4); }), ErrorKind::invalid_argument);
}

// The real thing, when scripts/setup.sh has fetched it: MNIST (raw IDX) and Fashion-MNIST (gzip).
class RealData : public ::testing::TestWithParam<const char*> {};

TEST_P(RealData, SizesAndNormalisation) {
  const std::string dir = std::string(ZT_SOURCE_DIR) + "/data/" + GetParam();
  if (!std::filesystem::exists(dir + "/train-images-idx3-ubyte") &&
      !std::filesystem::exists(dir + "/train-images-idx3-ubyte.gz"))
    GTEST_SKIP() << dir << " not present; run scripts/setup.sh";
  const bool fashion = std::string(GetParam()) == "fashion-mnist";
  const float mean = fashion ? 0.2860f : 0.1307f, sd = fashion ? 0.3530f : 0.3081f;
  Dataset train = load_mnist(dir, "train", mean, sd);
  Dataset test = load_mnist(dir, "test", mean, sd);
  EXPECT_EQ(train.images.shape(), (Shape{60000, 784}));
  EXPECT_EQ(test.images.shape(), (Shape{10000, 784}));
  std::vector<int64_t> counts(10, 0);
  for (int64_t i = 0; i < test.size(); ++i) counts[size_t(test.labels.data<int32_t>()[i])]++;
  for (int64_t c : counts) EXPECT_GT(c, 800);  // every class is well represented
  // Normalised with the data set's own statistics: the training mean is ~0 and the stddev ~1.
  double s = 0, s2 = 0;
  const float* x = train.images.data<float>();
  for (int64_t i = 0; i < train.images.numel(); ++i) s += x[i], s2 += double(x[i]) * x[i];
  const double m = s / double(train.images.numel());
  EXPECT_NEAR(m, 0.0, 1e-3);
  EXPECT_NEAR(std::sqrt(s2 / double(train.images.numel()) - m * m), 1.0, 1e-3);
}

INSTANTIATE_TEST_SUITE_P(Datasets, RealData, ::testing::Values("mnist", "fashion-mnist"), [](const auto& info) {
  return std::string(info.param) == "mnist" ? "mnist" : "fashion_mnist";
});

}  // namespace
}  // namespace zt::data
