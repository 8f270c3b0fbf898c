// Token shards of both versions (llm.c's 1: uint16, 2: uint32), mapped and read as one sequence
// (Note [mapped token shards]): round trips, mixed versions, errors naming the file and the byte
// offset, globs, the vocabulary check, prepare's choice of version, and resident memory.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>

#include "common/error_of.h"
#include "common/temp_dir.h"
#include "corpus_files.h"
#include "fake_tokenizer.h"
#include "zt/data/lm_batches.h"
#include "zt/data/prepare.h"
#include "zt/data/token_shard.h"
#include "zt/data/token_stream.h"

namespace zt::data {
namespace {

using ::testing::HasSubstr;
using testing_util::error_kind_of;
using testing_util::error_of;

std::string header_bytes(int32_t version, int32_t count) {
  std::string b(kTokenShardHeaderBytes, '\0');
  const int32_t h[3] = {kTokenShardMagic, version, count};
  std::memcpy(b.data(), h, sizeof h);
  return b;
}

template <typename T>
std::string payload(const std::vector<T>& t) {
  return std::string(reinterpret_cast<const char*>(t.data()), t.size() * sizeof(T));
}

std::vector<int32_t> rows(const Tensor& t) { return {t.data<int32_t>(), t.data<int32_t>() + t.numel()}; }

std::vector<int32_t> all_of(const TokenStream& s) {
  std::vector<int32_t> out(size_t(s.size()));
  s.copy(0, s.size(), out.data());
  return out;
}

class TokenShardV2 : public testing_util::TempDirTest {};

TEST_F(TokenShardV2, RoundTripsAsLlmcWritesIt) {
  const std::vector<uint32_t> tokens = {0, 65535, 65536, 128255, 4000000000u, 7};
  write_token_shard(path("s.bin"), tokens, kTokenShardVersion32);
  std::ifstream f(path("s.bin"), std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(f)), {});
  EXPECT_EQ(bytes, header_bytes(2, 6) + payload(tokens));
  EXPECT_EQ(read_token_shard32(path("s.bin")), tokens);
  EXPECT_EQ(parse_token_shard32(bytes.data(), bytes.size()), tokens);
  const TokenStream s = TokenStream::map_files({path("s.bin")});
  ASSERT_EQ(s.size(), 6);
  EXPECT_EQ(s.token(3), 128255u);
  EXPECT_EQ(s.token(4), 4000000000u);
}

TEST_F(TokenShardV2, Version1IsStillReadByEveryReader) {
  const std::vector<uint16_t> tokens = {50256, 0, 65535, 9};
  write_token_shard(path("v1.bin"), tokens);
  EXPECT_EQ(read_token_shard(path("v1.bin")), tokens);
  EXPECT_EQ(read_token_shard32(path("v1.bin")), (std::vector<uint32_t>{50256, 0, 65535, 9}));
  EXPECT_EQ(all_of(TokenStream::map_files({path("v1.bin")})), (std::vector<int32_t>{50256, 0, 65535, 9}));
  // Written through the uint32 writer in version 1: the same bytes; a token past uint16 is refused.
  write_token_shard(path("w.bin"), std::vector<uint32_t>{50256, 0, 65535, 9}, kTokenShardVersion);
  EXPECT_EQ(read_token_shard(path("w.bin")), tokens);
  EXPECT_THAT(error_of([&] {
                write_token_shard(path("x.bin"), std::vector<uint32_t>{1, 65536}, 1);
              }),
              HasSubstr("token 1 is 65536, too large for a version 1 shard"));
}

TEST_F(TokenShardV2, TheUint16ReaderRefusesVersion2AndEveryReaderVersion3) {
  const std::string v2 = write("v2.bin", header_bytes(2, 1) + payload(std::vector<uint32_t>{70000}));
  EXPECT_THAT(error_of([&] { read_token_shard(v2); }), HasSubstr("unsupported token shard version 2 at byte offset 4"));
  const std::string v3 = write("v3.bin", header_bytes(3, 1) + payload(std::vector<uint32_t>{1}));
  for (const std::string& msg :
       {error_of([&] { read_token_shard32(v3); }), error_of([&] { TokenStream::map_files({v3}); })})
    EXPECT_THAT(msg, HasSubstr(v3 + ": unsupported token shard version 3 at byte offset 4 (known: 1 = uint16"));
}

TEST_F(TokenShardV2, ATruncatedVersion2ShardNamesTheFileAndByteOffset) {
  // 3 uint32 tokens promised (1036 bytes), 5 uint16's worth given (1034): version 1's size, not 2's.
  const std::string p = write("t.bin", header_bytes(2, 3) + payload(std::vector<uint16_t>{1, 2, 3, 4, 5}));
  const std::string want = p +
                           ": truncated at byte offset 1034: header says 3 tokens (expected 1036 bytes) but "
                           "file has 1034 bytes (version 2: 4 bytes a token)";
  EXPECT_EQ(error_kind_of([&] { TokenStream::map_files({p}); }), ErrorKind::data);
  EXPECT_THAT(error_of([&] { TokenStream::map_files({p}); }), HasSubstr(want));
  EXPECT_THAT(error_of([&] { read_token_shard32(p); }), HasSubstr(want));
  const std::string odd = write("o.bin", header_bytes(2, 1) + payload(std::vector<uint32_t>{1}) + "xx");
  EXPECT_THAT(error_of([&] { TokenStream::map_files({odd}); }),
              HasSubstr(odd + ": 2 trailing bytes at byte offset 1028"));
  EXPECT_THAT(error_of([&] { TokenStream::map_files({write("h.bin", "abc")}); }),
              HasSubstr("h.bin: truncated at byte offset 3"));
}

TEST_F(TokenShardV2, PrepareWritesVersion2ExactlyWhenIdsOutgrowUint16) {
  EXPECT_EQ(token_shard_version_for(65536), kTokenShardVersion);  // ids 0..65535 fit
  EXPECT_EQ(token_shard_version_for(65537), kTokenShardVersion32);
  // The byte tokenizer with every id moved past uint16.
  struct Wide : testing::ByteTokenizer {
    std::vector<int32_t> encode(std::string_view text) const override {
      std::vector<int32_t> ids = ByteTokenizer::encode(text);
      for (int32_t& id : ids) id += 70000;
      return ids;
    }
    int32_t vocab_size() const override { return 70257; }
    int32_t special(std::string_view t) const override { return t == "<|endoftext|>" ? 70256 : -1; }
  };
  PrepareLmOptions o;
  o.data_dir = testing::write_fake_corpus(path("data"), {"1790_a_d.txt", "1791_b_r.txt", "1792_c_r.txt"}, 3);
  o.out = path("out");
  o.val_fraction = 0.5;
  const Wide wide;
  const PrepareLmReport r = prepare_lm(o, wide);
  EXPECT_EQ(r.shard_version, 2);
  const std::vector<uint32_t> train = read_token_shard32(o.out + "/train_000000.bin");
  ASSERT_EQ(int64_t(train.size()), r.train_tokens);
  EXPECT_EQ(train.front(), 70256u);  // the separator
  EXPECT_GE(*std::min_element(train.begin() + 1, train.end()), 70000u);
  EXPECT_THAT(error_of([&] { read_token_shard(o.out + "/val_000000.bin"); }), HasSubstr("version 2 at byte offset 4"));
  EXPECT_THAT(nlohmann::json::parse(std::ifstream(o.out + "/manifest.json"))["format"].get<std::string>(),
              HasSubstr("version 2, count), uint32 tokens"));
  // The ordinary byte tokenizer still gets version 1.
  o.out = path("out1");
  EXPECT_EQ(prepare_lm(o, testing::ByteTokenizer()).shard_version, 1);
  EXPECT_NO_THROW(read_token_shard(o.out + "/train_000000.bin"));
}

class TokenStreamTest : public testing_util::TempDirTest {
 protected:
  // Shards a.bin (v1: 0..9), b.bin (v2, empty), c.bin (v2: 70000..70006), d.bin (v1: 20..24).
  std::vector<std::string> mixed() {
    std::vector<uint16_t> a(10), d(5);
    std::iota(a.begin(), a.end(), 0);
    std::iota(d.begin(), d.end(), 20);
    std::vector<uint32_t> c(7);
    std::iota(c.begin(), c.end(), 70000);
    write_token_shard(path("a.bin"), a);
    write_token_shard(path("b.bin"), std::vector<uint32_t>{}, 2);
    write_token_shard(path("c.bin"), c, 2);
    write_token_shard(path("d.bin"), d);
    return {path("a.bin"), path("b.bin"), path("c.bin"), path("d.bin")};
  }
  std::vector<int32_t> mixed_tokens() const {
    std::vector<int32_t> t;
    for (int i = 0; i < 10; ++i) t.push_back(i);
    for (int i = 0; i < 7; ++i) t.push_back(70000 + i);
    for (int i = 0; i < 5; ++i) t.push_back(20 + i);
    return t;
  }
};

TEST_F(TokenStreamTest, MixedVersionsReadAsOneSequenceAcrossShardBoundaries) {
  const TokenStream s = TokenStream::map_files(mixed());
  EXPECT_EQ(s.size(), 22);
  EXPECT_EQ(s.num_parts(), 3);  // the empty shard holds no token
  EXPECT_EQ(all_of(s), mixed_tokens());
  std::vector<int32_t> span(9);
  s.copy(8, 9, span.data());  // a.bin's tail, all of c.bin
  const std::vector<int32_t> want = mixed_tokens();
  EXPECT_EQ(span, std::vector<int32_t>(want.begin() + 8, want.begin() + 17));
  EXPECT_EQ(s.token(10), 70000u);
  EXPECT_EQ(s.token(17), 20u);
  EXPECT_THROW(s.copy(20, 3, span.data()), Error);
  EXPECT_THROW(s.token(22), Error);
  const TokenStream::Place p = s.locate(12);
  EXPECT_EQ(p.name, path("c.bin"));
  EXPECT_EQ(p.index, 2);
  EXPECT_EQ(p.byte_offset, 1024u + 8);
}

TEST_F(TokenStreamTest, MappedShardsGiveTheBatchesOfTheTokensInMemory) {
  std::vector<uint16_t> a(300), b(257);
  for (size_t i = 0; i < a.size(); ++i) a[i] = uint16_t(i * 7 % 1000);
  for (size_t i = 0; i < b.size(); ++i) b[i] = uint16_t(i * 13 % 1000);
  write_token_shard(path("train_000000.bin"), a);
  write_token_shard(path("train_000001.bin"), std::vector<uint32_t>(b.begin(), b.end()), 2);
  std::vector<uint16_t> both = a;
  both.insert(both.end(), b.begin(), b.end());
  const TokenStream mapped = TokenStream::map_files({path("train_000000.bin"), path("train_000001.bin")});
  LmBatches from_files(mapped, 16, {4, 1, 1, 0}, 5), from_memory(both, 16, {4, 1, 1, 0}, 5);
  ASSERT_EQ(from_files.num_windows(), from_memory.num_windows());
  for (int64_t step = 0; step < from_files.steps_per_epoch(); ++step) {
    EXPECT_EQ(rows(from_files.global_batch(step).x), rows(from_memory.global_batch(step).x)) << step;
    EXPECT_EQ(rows(from_files.global_batch(step).y), rows(from_memory.global_batch(step).y)) << step;
  }
  LmEvalWindows eval_files(mapped, 16), eval_memory(both, 16);
  EXPECT_EQ(rows(eval_files.batch(1, 8).y), rows(eval_memory.batch(1, 8).y));
}

TEST_F(TokenStreamTest, ATokenPastTheVocabularyNamesItsFileAndByteOffset) {
  const TokenStream s = TokenStream::map_files(mixed());
  EXPECT_NO_THROW(check_token_range(s, 70007));
  // c.bin (version 2): token 70006 is its 7th, at 1024 + 6 * 4.
  EXPECT_EQ(error_kind_of([&] { check_token_range(s, 70006); }), ErrorKind::data);
  EXPECT_THAT(error_of([&] { check_token_range(s, 70006); }),
              HasSubstr(path("c.bin") + ": token 6 (byte offset 1048) is 70006, outside the vocabulary of 70006"));
  // The first one in the sequence is named: a.bin (version 1), token 9 at 1024 + 9 * 2.
  EXPECT_THAT(error_of([&] { check_token_range(s, 9); }),
              HasSubstr(path("a.bin") + ": token 9 (byte offset 1042) is 9, outside the vocabulary of 9"));
  // Offsets are in the file named, not in the sequence: d.bin's token 1 (21) at 1024 + 1 * 2.
  EXPECT_THAT(error_of([&] {
                check_token_range(TokenStream::map_files({path("a.bin"), path("d.bin")}), 21);
              }),
              HasSubstr(path("d.bin") + ": token 1 (byte offset 1026) is 21, outside the vocabulary of 21"));
}

TEST_F(TokenStreamTest, ScanVisitsARangeInOrderAndStopsWhenAsked) {
  const TokenStream s = TokenStream::map_files(mixed());
  std::vector<int32_t> seen;
  s.scan(5, 19, [&](int64_t first, const uint32_t* t, int64_t n) {
    EXPECT_EQ(first, 5 + int64_t(seen.size()));
    seen.insert(seen.end(), t, t + n);
    return true;
  });
  const std::vector<int32_t> want = mixed_tokens();
  EXPECT_EQ(seen, std::vector<int32_t>(want.begin() + 5, want.begin() + 19));
  int calls = 0;
  s.scan(0, 22, [&](int64_t, const uint32_t*, int64_t) { return ++calls, false; });
  EXPECT_EQ(calls, 1);
  s.scan(3, 3, [&](int64_t, const uint32_t*, int64_t) { return ADD_FAILURE(), true; });
}

TEST_F(TokenStreamTest, GlobsMatchInNameOrderAndNoMatchNamesTheKeyAndPattern) {
  for (const char* n : {"fw_train_000010.bin", "fw_train_000002.bin", "fw_train_000001.bin", "fw_val_000000.bin"})
    write_token_shard(path(n), {1, 2});
  EXPECT_EQ(glob_token_shards(path("fw_train_*.bin"), "data.train_files"),
            (std::vector<std::string>{path("fw_train_000001.bin"), path("fw_train_000002.bin"),
                                      path("fw_train_000010.bin")}));
  const std::string none = path("nothing_*.bin");
  EXPECT_EQ(error_kind_of([&] { glob_token_shards(none, "data.val_files"); }), ErrorKind::config);
  EXPECT_THAT(error_of([&] { glob_token_shards(none, "data.val_files"); }),
              HasSubstr("[config] 'data.val_files' pattern '" + none + "' matches no file"));
}

// VmRSS in bytes, from /proc/self/status (the current value, not the high-water mark).
int64_t rss_bytes() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
  return -1;
}

TEST_F(TokenStreamTest, BatchesFromALargeMappedShardLeaveResidentMemoryFlat) {
  constexpr int64_t kTokens = int64_t(64) << 20;  // 128 MB of version 1 shard
  {
    std::ofstream f(path("big.bin"), std::ios::binary);
    f << header_bytes(1, int32_t(kTokens));
    std::vector<uint16_t> chunk(1 << 20);
    for (int64_t i = 0; i < kTokens; i += int64_t(chunk.size())) {
      for (size_t j = 0; j < chunk.size(); ++j) chunk[j] = uint16_t((i + int64_t(j)) % 50257);
      f.write(reinterpret_cast<const char*>(chunk.data()), std::streamsize(chunk.size() * 2));
    }
  }
  const int64_t before = rss_bytes();
  ASSERT_GT(before, 0);
  const TokenStream s = TokenStream::map_files({path("big.bin")});
  check_token_range(s, 50257);  // every page read once, then dropped
  LmBatches batches(s, 256, {8, 1, 1, 0}, 3);
  int64_t sum = 0;
  for (int64_t step = 0; step < 20; ++step) sum += rows(batches.micro_batch(step, 0).x)[0];
  EXPECT_GE(sum, 0);
  // An eighth of the shard at most: mapped pages are dropped after use (a sanitizer build's allocator
  // quarantine and shadow pages alone grew RSS by 8.2 MB here).
  const int64_t grown = rss_bytes() - before;
  EXPECT_LT(grown, int64_t(16) << 20) << "resident memory grew by " << grown << " bytes over a 128 MB shard";
}

}  // namespace
}  // namespace zt::data
