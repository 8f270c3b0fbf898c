// IDX reader: round trips (raw and gzip), file resolution, and the errors for bad files.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/error_of.h"

#include "idx_writer.h"
#include "zt/core/error.h"
#include "zt/data/mnist.h"

namespace zt::data {
namespace {

using ::testing::HasSubstr;
using testing::idx_bytes;
using testing::write_file;

class IdxTest : public testing::TempDirTest {};

std::vector<uint8_t> iota_bytes(size_t n) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = uint8_t(i * 7 + 3);
  return v;
}

using zt::testing_util::error_kind_of;
using zt::testing_util::error_of;

TEST_F(IdxTest, RawImagesRoundTrip) {
  auto payload = iota_bytes(3 * 2 * 4);
  write_file(path("img"), idx_bytes(0x803, {3, 2, 4}, payload), false);
  IdxArray a = read_idx(path("img"));
  EXPECT_EQ(a.dims, (std::vector<int64_t>{3, 2, 4}));
  EXPECT_EQ(a.bytes, payload);
}

TEST_F(IdxTest, RawLabelsRoundTrip) {
  std::vector<uint8_t> payload = {1, 0, 9, 4};
  write_file(path("lbl"), idx_bytes(0x801, {4}, payload), false);
  IdxArray a = read_idx(path("lbl"));
  EXPECT_EQ(a.dims, (std::vector<int64_t>{4}));
  EXPECT_EQ(a.bytes, payload);
}

TEST_F(IdxTest, GzipFoundWhenOnlyGzExists) {
  auto payload = iota_bytes(5 * 3 * 3);
  write_file(path("img.gz"), idx_bytes(0x803, {5, 3, 3}, payload), true);
  IdxArray a = read_idx(path("img"));
  EXPECT_EQ(a.dims, (std::vector<int64_t>{5, 3, 3}));
  EXPECT_EQ(a.bytes, payload);
  EXPECT_EQ(read_idx(path("img.gz")).bytes, payload);  // the .gz name itself also works
}

TEST_F(IdxTest, RawPreferredOverGz) {
  write_file(path("lbl"), idx_bytes(0x801, {2}, {1, 2}), false);
  write_file(path("lbl.gz"), idx_bytes(0x801, {3}, {7, 8, 9}), true);
  EXPECT_EQ(read_idx(path("lbl")).bytes, (std::vector<uint8_t>{1, 2}));
}

// Files larger than the reader's 1 MiB chunk, raw and gzipped (the multi-chunk path).
TEST_F(IdxTest, LargeFilesSpanSeveralChunks) {
  auto payload = iota_bytes(1500 * 28 * 28);
  ASSERT_GT(payload.size(), size_t(1) << 20);
  write_file(path("big"), idx_bytes(0x803, {1500, 28, 28}, payload), false);
  write_file(path("bigz.gz"), idx_bytes(0x803, {1500, 28, 28}, payload), true);
  EXPECT_EQ(read_idx(path("big")).bytes, payload);
  EXPECT_EQ(read_idx(path("bigz")).bytes, payload);
}

TEST_F(IdxTest, ZeroItemsIsValid) {
  write_file(path("lbl"), idx_bytes(0x801, {0}, {}), false);
  IdxArray a = read_idx(path("lbl"));
  EXPECT_EQ(a.dims, (std::vector<int64_t>{0}));
  EXPECT_TRUE(a.bytes.empty());
}

TEST_F(IdxTest, MissingFileNamesBothCandidates) {
  std::string msg = error_of([&] { read_idx(path("nope")); });
  EXPECT_THAT(msg, HasSubstr("[data]"));
  EXPECT_THAT(msg, HasSubstr(path("nope") + ": no such file"));
  EXPECT_THAT(msg, HasSubstr(path("nope") + ".gz"));
}

TEST_F(IdxTest, TruncatedPayloadNamesSizes) {
  auto bytes = idx_bytes(0x803, {3, 2, 2}, iota_bytes(12));
  bytes.resize(bytes.size() - 3);  // 16 header + 9 of 12 payload bytes
  write_file(path("img"), bytes, false);
  std::string msg = error_of([&] { read_idx(path("img")); });
  EXPECT_THAT(msg, HasSubstr(path("img")));
  EXPECT_THAT(msg,
              HasSubstr("truncated at byte offset 25: header says 3 items (expected 28 bytes) but file has 25 bytes"));
}

TEST_F(IdxTest, TruncatedGzipPayloadSaysDecompressed) {
  write_file(path("lbl.gz"), idx_bytes(0x801, {10}, {1, 2, 3}), true);
  std::string msg = error_of([&] { read_idx(path("lbl")); });
  EXPECT_THAT(msg, HasSubstr(path("lbl.gz")));
  EXPECT_THAT(msg, HasSubstr("header says 10 items (expected 18 bytes) but file has 11 decompressed bytes"));
}

TEST_F(IdxTest, TruncatedHeader) {
  write_file(path("a"), {0, 0, 8}, false);
  EXPECT_THAT(error_of([&] { read_idx(path("a")); }),
              HasSubstr(path("a") + ": truncated: file has 3 bytes but an IDX header needs at least 4"));
  write_file(path("b"), idx_bytes(0x803, {5}, {}), false);  // 3 dims promised, 1 present
  EXPECT_THAT(error_of([&] { read_idx(path("b")); }),
              HasSubstr(path("b") + ": truncated: 3-dim IDX header needs 16 bytes but file has 8 bytes"));
}

TEST_F(IdxTest, TrailingBytesAreAnError) {
  write_file(path("lbl"), idx_bytes(0x801, {2}, {1, 2, 3, 4}), false);
  std::string msg = error_of([&] { read_idx(path("lbl")); });
  EXPECT_THAT(msg, HasSubstr(path("lbl") + ": 2 trailing bytes"));
  EXPECT_THAT(msg, HasSubstr("expected 10 bytes) but file has 12 bytes"));
}

TEST_F(IdxTest, CorruptMagicNamesOffsetAndValue) {
  write_file(path("img"), idx_bytes(0x12345678, {1}, {0}), false);
  std::string msg = error_of([&] { read_idx(path("img")); });
  EXPECT_THAT(msg, HasSubstr(path("img") + ": bad IDX magic at byte offset 0: found 0x12345678"));
  EXPECT_THAT(msg, HasSubstr("expected 0x00000801 (labels) or 0x00000803 (images)"));
  // A wrong element type (0x0D = float) is rejected the same way.
  write_file(path("f"), idx_bytes(0x00000D01, {1}, {0, 0, 0, 0}), false);
  EXPECT_THAT(error_of([&] { read_idx(path("f")); }), HasSubstr("found 0x00000d01"));
}

TEST_F(IdxTest, ZeroDimensionNamesOffset) {
  write_file(path("img"), idx_bytes(0x803, {2, 0, 4}, {}), false);
  EXPECT_THAT(error_of([&] { read_idx(path("img")); }), HasSubstr(path("img") + ": dimension 1 at byte offset 8 is 0"));
}

TEST_F(IdxTest, CorruptGzipStreamNamesFile) {
  // A gzip header followed by a cut-off deflate stream.
  std::string full = path("full.gz");
  write_file(full, idx_bytes(0x803, {100, 10, 10}, iota_bytes(10000)), true);
  std::ifstream is(full, std::ios::binary);
  std::vector<uint8_t> gz((std::istreambuf_iterator<char>(is)), std::istreambuf_iterator<char>());
  gz.resize(gz.size() / 2);
  write_file(path("cut.gz"), gz, false);
  std::string msg = error_of([&] { read_idx(path("cut.gz")); });
  EXPECT_THAT(msg, HasSubstr(path("cut.gz")));
}

// The CLI decides on the kind (Note [errors across ranks] in src/apps/main.cpp).
TEST_F(IdxTest, ATruncatedFileIsADataError) {
  auto bytes = idx_bytes(0x803, {3, 2, 2}, iota_bytes(12));
  write_file(path("whole"), bytes, false);
  EXPECT_NO_THROW(read_idx(path("whole")));
  bytes.resize(bytes.size() - 3);
  write_file(path("img"), bytes, false);
  EXPECT_EQ(error_kind_of([&] { read_idx(path("img")); }), ErrorKind::data);
  write_file(path("hdr"), {0, 0, 8}, false);  // shorter than the magic
  EXPECT_EQ(error_kind_of([&] { read_idx(path("hdr")); }), ErrorKind::data);
  write_file(path("lbl.gz"), idx_bytes(0x801, {10}, {1, 2, 3}), true);
  EXPECT_EQ(error_kind_of([&] { read_idx(path("lbl")); }), ErrorKind::data);
}

TEST_F(IdxTest, MissingCorruptAndTrailingFilesAreDataErrors) {
  EXPECT_EQ(error_kind_of([&] { read_idx(path("nope")); }), ErrorKind::data);
  write_file(path("magic"), idx_bytes(0x12345678, {1}, {0}), false);
  EXPECT_EQ(error_kind_of([&] { read_idx(path("magic")); }), ErrorKind::data);
  write_file(path("trail"), idx_bytes(0x801, {2}, {1, 2, 3, 4}), false);
  EXPECT_EQ(error_kind_of([&] { read_idx(path("trail")); }), ErrorKind::data);
}

}  // namespace
}  // namespace zt::data
