// load_cifar10 / parse_cifar10 on records the tests write (CIFAR-10 itself is not installable
// offline): order across batch files, per-channel normalisation, limits, every refusal naming
// the file and byte offset, and the memory budget. Also pad_images.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "common/error_of.h"
#include "idx_writer.h"
#include "zt/core/allocator.h"
#include "zt/data/cifar.h"

namespace zt::data {
namespace {

using ::testing::HasSubstr;
using testing::write_file;
using testing_util::error_kind_of;
using testing_util::error_of;

// Record r of a file: label (first + r) % 10, pixel p = (first + r + 7 p) % 256.
std::vector<uint8_t> records(int first, int n) {
  std::vector<uint8_t> b;
  for (int r = 0; r < n; ++r) {
    b.push_back(uint8_t((first + r) % 10));
    for (int p = 0; p < kCifarImageBytes; ++p) b.push_back(uint8_t((first + r + 7 * p) % 256));
  }
  return b;
}

float normalised(int v, int channel) { return (float(v) / 255.f - kCifarMean[channel]) / kCifarStd[channel]; }

class CifarTest : public testing::TempDirTest {
 protected:
  // Five training batches of 3, 2, 1, 2, 2 records (10 in all) and a test batch of 4.
  void write_all() {
    const int sizes[5] = {3, 2, 1, 2, 2};
    for (int f = 0, first = 0; f < 5; first += sizes[f], ++f)
      put("data_batch_" + std::to_string(f + 1) + ".bin", records(first, sizes[f]));
    put("test_batch.bin", records(100, 4));
  }
  void put(const std::string& name, const std::vector<uint8_t>& bytes) { write_file(path(name), bytes, false); }
  std::string dir() const { return dir_.string(); }
};

// Every sample as the records say: sample i has label i % 10 and pixel p = (i + 7 p) % 256.
void expect_samples(const Dataset& ds, int first, int n) {
  ASSERT_EQ(ds.size(), n);
  ASSERT_EQ(ds.images.shape(), (Shape{n, kCifarImageBytes}));
  const float* x = ds.images.data<float>();
  const int32_t* y = ds.labels.data<int32_t>();
  for (int i = 0; i < n; ++i) {
    EXPECT_EQ(y[i], (first + i) % 10) << i;
    for (int p = 0; p < kCifarImageBytes; p += 97)  // a sample of pixels across the three planes
      ASSERT_FLOAT_EQ(x[i * kCifarImageBytes + p], normalised((first + i + 7 * p) % 256, p / 1024))
          << "sample " << i << " pixel " << p;
  }
}

TEST_F(CifarTest, ReadsTheFiveTrainingBatchesInOrderAndTheTestBatch) {
  write_all();
  expect_samples(load_cifar10(dir(), "train"), 0, 10);
  expect_samples(load_cifar10(dir(), "test"), 100, 4);
}

TEST_F(CifarTest, ChannelsAreNormalisedWithTheirOwnStatistics) {
  write_all();
  const Dataset ds = load_cifar10(dir(), "test");
  // Pixel 0 of each plane of record 0 is 100, 100 + 7*1024, 100 + 7*2048 (mod 256): all equal 100.
  for (int c = 0; c < 3; ++c) EXPECT_FLOAT_EQ(ds.images.data<float>()[c * 1024], normalised(100, c));
  EXPECT_NE(normalised(100, 0), normalised(100, 1));
}

// The limit stops reading: a bad label in a later file is never seen.
TEST_F(CifarTest, ALimitReadsOnlyTheFilesItNeeds) {
  write_all();
  std::vector<uint8_t> bad = records(8, 2);
  bad[kCifarRecordBytes] = 10;  // the second record's label
  put("data_batch_5.bin", bad);
  expect_samples(load_cifar10(dir(), "train", 4), 0, 4);  // files 1 and 2 (3 + 1 records)
  expect_samples(load_cifar10(dir(), "train", 8), 0, 8);
  EXPECT_THAT(error_of([&] { load_cifar10(dir(), "train"); }),
              HasSubstr(path("data_batch_5.bin") + ": label 10 of record 1 (byte offset 3073) is outside 0..9"));
  EXPECT_EQ(load_cifar10(dir(), "test", 100).size(), 4);  // a limit past the end keeps all
}

TEST_F(CifarTest, AFileThatIsNotWholeRecordsIsRefusedBeforeAnythingIsRead) {
  write_all();
  std::vector<uint8_t> cut = records(8, 2);
  cut.erase(cut.end() - 5, cut.end());
  put("data_batch_5.bin", cut);
  const std::string msg = error_of([&] { load_cifar10(dir(), "train", 1); });  // sizes come first
  EXPECT_THAT(msg, HasSubstr(path("data_batch_5.bin") + ": 6141 bytes is not a whole number of 3073-byte records"));
  EXPECT_THAT(msg, HasSubstr("the record at byte offset 3073 is cut after 3068 bytes"));
  EXPECT_EQ(error_kind_of([&] { load_cifar10(dir(), "train"); }), ErrorKind::data);
  put("test_batch.bin", {});
  EXPECT_THAT(error_of([&] { load_cifar10(dir(), "test"); }), HasSubstr(path("test_batch.bin") + " is empty"));
  put("test_batch.bin", {3});  // a label and no pixels
  EXPECT_THAT(error_of([&] { load_cifar10(dir(), "test"); }), HasSubstr("the record at byte offset 0 is cut after 1"));
}

TEST_F(CifarTest, MissingFilesAndFoldersAreDataErrorsThatNameThePath) {
  write_all();
  std::filesystem::remove(path("data_batch_3.bin"));
  EXPECT_THAT(error_of([&] { load_cifar10(dir(), "train"); }), HasSubstr(path("data_batch_3.bin") + ": No such file"));
  EXPECT_EQ(error_kind_of([&] { load_cifar10(dir(), "train"); }), ErrorKind::data);
  std::filesystem::create_directory(path("data_batch_3.bin"));
  EXPECT_THAT(error_of([&] { load_cifar10(dir(), "train"); }), HasSubstr("is a directory, not a regular file"));
  EXPECT_EQ(error_kind_of([&] { load_cifar10(dir(), "valid"); }), ErrorKind::invalid_argument);
  EXPECT_THAT(error_of([&] { load_cifar10(dir(), "test", -1); }), HasSubstr("limit must be >= 0"));
}

TEST_F(CifarTest, ASplitLargerThanTheBudgetSaysWhatItNeeds) {
  write_all();
  struct BudgetGuard {
    ~BudgetGuard() { Allocator::global().set_budget(0); }
  } guard;
  const size_t in_use = Allocator::global().stats().total_current;
  Allocator::global().set_budget(in_use + 60000);  // 10 samples need 10 * 3072 * 4 + 40 = 122920 bytes
  const std::string msg = error_of([&] { load_cifar10(dir(), "train"); });
  EXPECT_THAT(msg, HasSubstr("the train split in " + dir() + " (10 samples of 3072 features) needs 120.0KiB"));
  EXPECT_THAT(msg, HasSubstr("data.train_limit"));
  EXPECT_EQ(error_kind_of([&] { load_cifar10(dir(), "train"); }), ErrorKind::out_of_memory);
  EXPECT_EQ(load_cifar10(dir(), "train", 4).size(), 4);
}

TEST(CifarParse, MemoryGivesWhatTheFileGives) {
  const std::vector<uint8_t> b = records(5, 3);
  expect_samples(parse_cifar10(b.data(), b.size(), "mem.bin"), 5, 3);
  EXPECT_THAT(error_of([&] { parse_cifar10(b.data(), 100, "mem.bin"); }), HasSubstr("mem.bin: 100 bytes"));
  EXPECT_THAT(error_of([&] { parse_cifar10(b.data(), 0); }), HasSubstr("<memory> is empty"));
}

TEST(PadImages, CentresEachPlaneAndFillsTheBorderPerChannel) {
  // Two samples of 2 channels x 2 x 2, values 1..16.
  std::vector<float> v(16);
  for (size_t i = 0; i < v.size(); ++i) v[i] = float(i + 1);
  Dataset ds{Tensor::from_vector(v, {2, 8}), Tensor::from_ints({3, 4}, {2})};
  const Dataset p = pad_images(ds, 2, 2, 5, {-1.f, -2.f});  // 1 before, 2 after
  ASSERT_EQ(p.images.shape(), (Shape{2, 50}));
  EXPECT_TRUE(p.labels.same(ds.labels));
  const std::vector<float> got = p.images.to_vector();
  auto at = [&](int s, int c, int y, int x) { return got[size_t(s * 50 + c * 25 + y * 5 + x)]; };
  EXPECT_EQ(at(0, 0, 1, 1), 1.f);
  EXPECT_EQ(at(0, 0, 1, 2), 2.f);
  EXPECT_EQ(at(0, 0, 2, 1), 3.f);
  EXPECT_EQ(at(0, 1, 2, 2), 8.f);
  EXPECT_EQ(at(1, 1, 1, 1), 13.f);
  EXPECT_EQ(at(0, 0, 0, 0), -1.f);
  EXPECT_EQ(at(0, 0, 3, 3), -1.f);
  EXPECT_EQ(at(1, 1, 4, 4), -2.f);
  EXPECT_EQ(at(1, 1, 1, 3), -2.f);
  // to == size copies.
  EXPECT_EQ(pad_images(ds, 2, 2, 2, {0.f, 0.f}).images.to_vector(), v);
}

TEST(PadImages, RefusesWhatItCannotPad) {
  Dataset ds{Tensor::zeros({2, 8}), Tensor::from_ints({0, 1}, {2})};
  EXPECT_THAT(error_of([&] { pad_images(ds, 2, 2, 1, {0.f, 0.f}); }), HasSubstr("1 <= size <= to"));
  EXPECT_THAT(error_of([&] { pad_images(ds, 2, 2, 4, {0.f}); }), HasSubstr("1 fill values for 2 channels"));
  EXPECT_THAT(error_of([&] { pad_images(ds, 1, 3, 4, {0.f}); }), HasSubstr("images must be contiguous f32 [n, 9]"));
}

}  // namespace
}  // namespace zt::data
