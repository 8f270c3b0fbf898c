// Seq-cls records (Note [seq-cls format]): round trip, padded batches, and each malformed
// field named with its record and byte offset.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>

#include "common/error_of.h"
#include "common/temp_dir.h"
#include "zt/data/seq_cls.h"

namespace zt::data {
namespace {

using ::testing::HasSubstr;
using testing_util::error_kind_of;
using testing_util::error_of;

SeqClsSet small_set() {
  SeqClsSet s(2, 6, 100);
  s.add(1, {2, 10, 11, 3});
  s.add(0, {2, 99, 3});
  s.add(1, {2, 5, 6, 7, 8, 3});
  return s;
}

// The bytes the format describes, written by hand.
std::string file_bytes(const SeqClsSet& s) {
  std::string b("ZTSEQCLS", 8);
  auto u32 = [&](uint32_t v) { b.append(reinterpret_cast<const char*>(&v), 4); };
  auto u16 = [&](uint16_t v) { b.append(reinterpret_cast<const char*>(&v), 2); };
  u32(1), u32(uint32_t(s.num_classes)), u32(uint32_t(s.max_len)), u32(uint32_t(s.vocab_size));
  const uint64_t n = uint64_t(s.size());
  b.append(reinterpret_cast<const char*>(&n), 8);
  for (int64_t i = 0; i < s.size(); ++i) {
    u16(uint16_t(s.labels[size_t(i)])), u16(uint16_t(s.length(i)));
    for (int64_t t = s.offsets[size_t(i)]; t < s.offsets[size_t(i) + 1]; ++t) u16(s.tokens[size_t(t)]);
  }
  return b;
}

class SeqClsTest : public testing_util::TempDirTest {
 protected:
  // `bytes` with the uint16/uint32 at `at` replaced.
  static std::string patched(std::string bytes, size_t at, uint32_t v, size_t width) {
    std::memcpy(bytes.data() + at, &v, width);
    return bytes;
  }
  std::string parse_error(const std::string& bytes) {
    EXPECT_EQ(error_kind_of([&] { read_seq_cls(write("x.bin", bytes)); }), ErrorKind::data);
    return error_of([&] { read_seq_cls(write("x.bin", bytes)); });
  }
};

TEST_F(SeqClsTest, RoundTripsInTheDocumentedLayout) {
  const SeqClsSet s = small_set();
  write_seq_cls(path("s.bin"), s);
  const SeqClsSet r = read_seq_cls(path("s.bin"));
  EXPECT_EQ(r.num_classes, 2);
  EXPECT_EQ(r.max_len, 6);
  EXPECT_EQ(r.vocab_size, 100);
  EXPECT_EQ(r.labels, s.labels);
  EXPECT_EQ(r.offsets, s.offsets);
  EXPECT_EQ(r.tokens, s.tokens);
  std::ifstream f(path("s.bin"), std::ios::binary);
  EXPECT_EQ(std::string((std::istreambuf_iterator<char>(f)), {}), file_bytes(s));
  EXPECT_EQ(r.class_counts(), (std::vector<int64_t>{1, 2}));
}

TEST_F(SeqClsTest, BatchesArePaddedWithZeroAndMasked) {
  const SeqClsSet s = small_set();
  const SeqClsBatch b = gather_seq_cls(s, {1, 2});
  EXPECT_EQ(b.ids.shape(), (Shape{2, 6}));
  const int32_t* ids = b.ids.data<int32_t>();
  const int32_t* mask = b.mask.data<int32_t>();
  EXPECT_EQ(std::vector<int32_t>(ids, ids + 12), (std::vector<int32_t>{2, 99, 3, 0, 0, 0, 2, 5, 6, 7, 8, 3}));
  EXPECT_EQ(std::vector<int32_t>(mask, mask + 12), (std::vector<int32_t>{1, 1, 1, 0, 0, 0, 1, 1, 1, 1, 1, 1}));
  EXPECT_EQ(std::vector<int32_t>(b.labels.data<int32_t>(), b.labels.data<int32_t>() + 2), (std::vector<int32_t>{0, 1}));
  EXPECT_THROW(gather_seq_cls(s, {3}), Error);
}

TEST_F(SeqClsTest, TrainingBatchesFollowTheGlobalLayout) {
  const SeqClsSet s = small_set();
  SeqClsBatches one(s, {2, 1, 1, 0}, 5);
  SeqClsBatches r0(s, {1, 1, 2, 0}, 5), r1(s, {1, 1, 2, 1}, 5);
  const SeqClsBatch g = one.global_batch(0);
  EXPECT_EQ(g.labels.data<int32_t>()[0], r0.micro_batch(0, 0).labels.data<int32_t>()[0]);
  EXPECT_EQ(g.labels.data<int32_t>()[1], r1.micro_batch(0, 0).labels.data<int32_t>()[0]);
  EXPECT_EQ(error_kind_of([&] { SeqClsBatches(s, {2, 1, 2, 0}, 5); }), ErrorKind::config);  // 4 > 3 records
}

TEST_F(SeqClsTest, AddChecksTheHeaderLimits) {
  SeqClsSet s(2, 4, 10);
  EXPECT_THROW(s.add(2, {1}), Error);
  EXPECT_THROW(s.add(0, {}), Error);
  EXPECT_THROW(s.add(0, {1, 2, 3, 4, 5}), Error);
  EXPECT_THROW(s.add(0, {10}), Error);
  s.add(1, {1, 2, 3, 9});  // exactly max_len, the largest token
  EXPECT_EQ(s.size(), 1);
  EXPECT_THROW(SeqClsSet(0, 4, 10), Error);
  EXPECT_THROW(SeqClsSet(2, 0, 10), Error);
  EXPECT_THROW(SeqClsSet(2, 4, 65537), Error);
}

TEST_F(SeqClsTest, EmptySetRoundTrips) {
  write_seq_cls(path("e.bin"), SeqClsSet(3, 8, 50));
  EXPECT_EQ(read_seq_cls(path("e.bin")).size(), 0);
}

TEST_F(SeqClsTest, HeaderErrorsNameTheField) {
  const std::string good = file_bytes(small_set());
  EXPECT_THAT(parse_error(good.substr(0, 20)), HasSubstr("truncated at byte offset 20: a seq-cls header needs 32"));
  EXPECT_THAT(parse_error("ZTSEQCLX" + good.substr(8)), HasSubstr("bad magic at byte offset 0"));
  EXPECT_THAT(parse_error(patched(good, 8, 2, 4)), HasSubstr("unsupported seq-cls version 2 at byte offset 8"));
  EXPECT_THAT(parse_error(patched(good, 12, 0, 4)), HasSubstr("num_classes 0 at byte offset 12"));
  EXPECT_THAT(parse_error(patched(good, 16, 0, 4)), HasSubstr("max_len 0 at byte offset 16"));
  EXPECT_THAT(parse_error(patched(good, 20, 70000, 4)), HasSubstr("vocab_size 70000 at byte offset 20"));
  EXPECT_THAT(parse_error(patched(good, 24, 1000000, 4)), HasSubstr("header says 1000000 records at byte offset 24"));
}

TEST_F(SeqClsTest, RecordErrorsNameTheRecordAndOffset) {
  const std::string good = file_bytes(small_set());  // record 0 at 32 (4 tokens), 1 at 44, 2 at 54
  EXPECT_THAT(parse_error(patched(good, 44, 2, 2)), HasSubstr("record 1: label 2 at byte offset 44 is outside 0..1"));
  EXPECT_THAT(parse_error(patched(good, 46, 0, 2)), HasSubstr("record 1: length 0 at byte offset 46"));
  EXPECT_THAT(parse_error(patched(good, 46, 7, 2)), HasSubstr("record 1: length 7 at byte offset 46 is outside 1..6"));
  EXPECT_THAT(parse_error(patched(good, 50, 100, 2)), HasSubstr("record 1: token 100 at byte offset 50"));
  EXPECT_THAT(parse_error(good.substr(0, good.size() - 2)), HasSubstr("record 2 has 6 tokens from byte offset 58"));
  EXPECT_THAT(parse_error(good.substr(0, 56)), HasSubstr("record 2 of 3 starts at byte offset 54"));
  EXPECT_THAT(parse_error(good + "zz"), HasSubstr("2 trailing bytes at byte offset 70"));
  EXPECT_THAT(parse_error(patched(good, 24, 2, 4)), HasSubstr("16 trailing bytes at byte offset 54"));
}

}  // namespace
}  // namespace zt::data
