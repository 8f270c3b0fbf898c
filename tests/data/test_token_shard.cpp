// Token shards (llm.c .bin): round trips, and every malformed header named with its byte offset.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "common/error_of.h"
#include "common/temp_dir.h"
#include "zt/data/token_shard.h"

namespace zt::data {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using testing_util::error_kind_of;
using testing_util::error_of;

// A shard's bytes: header fields as given (the rest zero), then `tokens`.
std::string shard_bytes(int32_t magic, int32_t version, int32_t count, const std::vector<uint16_t>& tokens) {
  std::string b(kTokenShardHeaderBytes, '\0');
  const int32_t h[3] = {magic, version, count};
  std::memcpy(b.data(), h, sizeof h);
  b.append(reinterpret_cast<const char*>(tokens.data()), tokens.size() * 2);
  return b;
}

class TokenShardTest : public testing_util::TempDirTest {
 protected:
  std::string put(const std::string& bytes) { return write("shard.bin", bytes); }
};

TEST_F(TokenShardTest, RoundTripsThroughAFileInLlmcLayout) {
  const std::vector<uint16_t> tokens = {50256, 0, 1, 65535, 464, 318};
  write_token_shard(path("s.bin"), tokens);
  EXPECT_EQ(read_token_shard(path("s.bin")), tokens);
  // The exact bytes llm.c writes: header of 256 int32, then little-endian uint16.
  std::ifstream f(path("s.bin"), std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(f)), {});
  EXPECT_EQ(bytes, shard_bytes(20240520, 1, 6, tokens));
  EXPECT_EQ(parse_token_shard(bytes.data(), bytes.size()), tokens);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);  // no temporary left
}

TEST_F(TokenShardTest, AnEmptyShardRoundTrips) {
  write_token_shard(path("e.bin"), {});
  EXPECT_TRUE(read_token_shard(path("e.bin")).empty());
  EXPECT_EQ(fs::file_size(path("e.bin")), kTokenShardHeaderBytes);
}

TEST_F(TokenShardTest, WritingReplacesAnOldShardWhole) {
  write_token_shard(path("s.bin"), {1, 2, 3});
  write_token_shard(path("s.bin"), {7});
  EXPECT_EQ(read_token_shard(path("s.bin")), std::vector<uint16_t>{7});
}

TEST_F(TokenShardTest, ATruncatedHeaderNamesTheFileAndSizes) {
  const std::string p = put(shard_bytes(20240520, 1, 0, {}).substr(0, 100));
  EXPECT_EQ(error_kind_of([&] { read_token_shard(p); }), ErrorKind::data);
  const std::string msg = error_of([&] { read_token_shard(p); });
  EXPECT_THAT(msg, HasSubstr(p));
  EXPECT_THAT(msg, HasSubstr("truncated at byte offset 100"));
  EXPECT_THAT(msg, HasSubstr("needs 1024 bytes"));
  EXPECT_THAT(error_of([&] { read_token_shard(put("")); }), HasSubstr("truncated at byte offset 0"));
}

TEST_F(TokenShardTest, WrongMagicIsNamedAtOffset0) {
  const std::string p = put(shard_bytes(20240521, 1, 2, {1, 2}));
  EXPECT_EQ(error_kind_of([&] { read_token_shard(p); }), ErrorKind::data);
  EXPECT_THAT(error_of([&] { read_token_shard(p); }),
              HasSubstr(p + ": bad token shard magic at byte offset 0: found 20240521, expected 20240520"));
}

TEST_F(TokenShardTest, WrongVersionIsNamedAtOffset4) {
  const std::string p = put(shard_bytes(20240520, 2, 2, {1, 2, 3, 4}));  // llm.c's version 2 is uint32 tokens
  EXPECT_EQ(error_kind_of([&] { read_token_shard(p); }), ErrorKind::data);
  EXPECT_THAT(error_of([&] { read_token_shard(p); }), HasSubstr("unsupported token shard version 2 at byte offset 4"));
}

TEST_F(TokenShardTest, NegativeCountIsNamedAtOffset8) {
  const std::string p = put(shard_bytes(20240520, 1, -1, {}));
  EXPECT_THAT(error_of([&] { read_token_shard(p); }), HasSubstr("negative token count -1 at byte offset 8"));
}

TEST_F(TokenShardTest, CountLargerThanThePayloadIsTruncation) {
  const std::string p = put(shard_bytes(20240520, 1, 5, {1, 2, 3}));
  EXPECT_EQ(error_kind_of([&] { read_token_shard(p); }), ErrorKind::data);
  EXPECT_THAT(error_of([&] { read_token_shard(p); }),
              HasSubstr(p + ": truncated at byte offset 1030: header says 5 tokens (expected 1034 bytes) but file has "
                            "1030 bytes"));
}

TEST_F(TokenShardTest, AHugeCountFailsBeforeAnyPayloadIsRead) {
  const std::string p = put(shard_bytes(20240520, 1, INT32_MAX, {1}));
  EXPECT_THAT(error_of([&] { read_token_shard(p); }), HasSubstr("header says 2147483647 tokens"));
}

TEST_F(TokenShardTest, CountSmallerThanThePayloadIsTrailingBytes) {
  const std::string p = put(shard_bytes(20240520, 1, 2, {1, 2, 3}));
  EXPECT_EQ(error_kind_of([&] { read_token_shard(p); }), ErrorKind::data);
  EXPECT_THAT(error_of([&] { read_token_shard(p); }),
              HasSubstr("2 trailing bytes at byte offset 1028: header says 2 tokens"));
  // An odd byte after the tokens, too.
  EXPECT_THAT(error_of([&] { read_token_shard(put(shard_bytes(20240520, 1, 1, {1}) + "x")); }),
              HasSubstr("1 trailing bytes at byte offset 1026"));
}

TEST_F(TokenShardTest, MemoryAndFileReadersAgreeOnErrors) {
  const std::string bytes = shard_bytes(20240520, 1, 4, {1, 2});
  EXPECT_THAT(error_of([&] { parse_token_shard(bytes.data(), bytes.size(), "mem"); }),
              HasSubstr("mem: truncated at byte offset 1028"));
  EXPECT_THAT(error_of([&] { parse_token_shard(bytes.data(), 10, "mem"); }), HasSubstr("truncated at byte offset 10"));
}

TEST_F(TokenShardTest, NonRegularAndMissingFilesAreDataErrors) {
  ASSERT_EQ(::mkfifo(path("fifo").c_str(), 0600), 0);
  EXPECT_THAT(error_of([&] { read_token_shard(path("fifo")); }), HasSubstr("not a regular file"));
  EXPECT_EQ(error_kind_of([&] { read_token_shard(path("missing.bin")); }), ErrorKind::data);
  EXPECT_THAT(error_of([&] { read_token_shard(dir_.string()); }), HasSubstr("not a regular file"));
}

TEST_F(TokenShardTest, WriterRefusesAFifo) {
  ASSERT_EQ(::mkfifo(path("fifo").c_str(), 0600), 0);
  EXPECT_THROW(write_token_shard(path("fifo"), {1}), Error);
}

}  // namespace
}  // namespace zt::data
