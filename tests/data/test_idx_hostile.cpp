// IDX files made to hurt: gzip bombs (rejected after decoding no more than the header says,
// with the heap measured), non-regular paths, damaged gzip streams, and parsing from memory.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <malloc.h>
#include <sys/stat.h>
#include <zlib.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <new>

#include "common/error_of.h"

#include "idx_writer.h"
#include "zt/core/error.h"
#include "zt/data/mnist.h"

// The heap this binary uses, measured: operator new is replaced to keep live and peak bytes.
namespace {
std::atomic<size_t> g_live{0}, g_peak{0};
void* counted_new(size_t n) {
  void* p = std::malloc(n ? n : 1);
  if (!p) throw std::bad_alloc();
  const size_t now = g_live += malloc_usable_size(p);
  for (size_t peak = g_peak.load(); now > peak && !g_peak.compare_exchange_weak(peak, now);) {
  }
  return p;
}
void counted_delete(void* p) noexcept {
  if (!p) return;
  g_live -= malloc_usable_size(p);
  std::free(p);
}
}  // namespace
void* operator new(size_t n) { return counted_new(n); }
void* operator new[](size_t n) { return counted_new(n); }
void operator delete(void* p) noexcept { counted_delete(p); }
void operator delete[](void* p) noexcept { counted_delete(p); }
void operator delete(void* p, size_t) noexcept { counted_delete(p); }
void operator delete[](void* p, size_t) noexcept { counted_delete(p); }

namespace zt::data {
namespace {

using ::testing::HasSubstr;
using testing::idx_bytes;
using testing::write_file;
using zt::testing_util::error_kind_of;
using zt::testing_util::error_of;

class IdxHostile : public testing::TempDirTest {};

// One gzip member holding `head` followed by `zeros` zero bytes, compressed as a stream.
std::vector<uint8_t> gzip_member(const std::vector<uint8_t>& head, size_t zeros) {
  z_stream zs{};
  EXPECT_EQ(deflateInit2(&zs, Z_BEST_COMPRESSION, Z_DEFLATED, 16 + MAX_WBITS, 9, Z_DEFAULT_STRATEGY), Z_OK);
  static const std::vector<uint8_t> block(1u << 20, 0);
  std::vector<uint8_t> out;
  uint8_t buf[1 << 16];
  auto feed = [&](const uint8_t* p, size_t n, int flush) {
    zs.next_in = const_cast<Bytef*>(p);
    zs.avail_in = uInt(n);
    do {
      zs.next_out = buf;
      zs.avail_out = sizeof buf;
      deflate(&zs, flush);
      out.insert(out.end(), buf, buf + (sizeof buf - zs.avail_out));
    } while (zs.avail_out == 0);
  };
  feed(head.data(), head.size(), Z_NO_FLUSH);
  for (size_t left = zeros; left > 0;) {
    const size_t n = std::min(left, block.size());
    feed(block.data(), n, Z_NO_FLUSH);
    left -= n;
  }
  feed(nullptr, 0, Z_FINISH);
  deflateEnd(&zs);
  return out;
}

std::vector<uint8_t> labels10() { return idx_bytes(0x801, {10}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 0}); }

// Runs fn and returns how far the live heap rose above where it started.
template <typename Fn>
size_t heap_growth(Fn&& fn) {
  const size_t base = g_live.load();
  g_peak = base;
  fn();
  return g_peak.load() - base;
}

// A 10-label header followed by 64 MiB of zeros in one member, and by 256 more members of
// 1 MiB each: both are rejected after decoding at most 64 KiB past the payload.
TEST_F(IdxHostile, GzipBombsAreRejectedQuicklyWithBoundedMemory) {
  std::vector<uint8_t> one = gzip_member(labels10(), 64u << 20);
  std::vector<uint8_t> many = gzip_member(labels10(), 0);
  const std::vector<uint8_t> mib = gzip_member({}, 1u << 20);
  for (int i = 0; i < 256; ++i) many.insert(many.end(), mib.begin(), mib.end());
  ASSERT_LT(one.size() + many.size(), 1u << 20);  // small files...
  write_file(path("one.gz"), one, false);
  write_file(path("many.gz"), many, false);
  for (const char* name : {"one.gz", "many.gz"}) {
    std::string msg;
    const auto t0 = std::chrono::steady_clock::now();
    const size_t grew = heap_growth([&] { msg = error_of([&] { read_idx(path(name)); }); });
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_LT(grew, size_t(1) << 20) << name;  // ...that would have inflated to 64 or 256 MiB
    EXPECT_LT(secs, 1.0) << name;
    EXPECT_THAT(msg, HasSubstr(path(name) + ": at least 65536 trailing bytes at byte offset 18: header says 10 items "
                                            "(expected 18 bytes) but file has at least 65554 decompressed bytes"));
    EXPECT_EQ(error_kind_of([&] { read_idx(path(name)); }), ErrorKind::data);
  }
  // The same member without the zeros is a good file, so it is the bomb that is rejected.
  write_file(path("good.gz"), gzip_member(labels10(), 0), false);
  EXPECT_EQ(read_idx(path("good.gz")).bytes.size(), 10u);
}

// load_mnist checks both headers before it decodes either payload.
TEST_F(IdxHostile, MnistWithABombOfLabelsIsRejectedWithBoundedMemory) {
  write_file(path("train-images-idx3-ubyte"), idx_bytes(0x803, {10, 2, 2}, std::vector<uint8_t>(40, 7)), false);
  write_file(path("train-labels-idx1-ubyte.gz"), gzip_member(labels10(), 16u << 20), false);
  std::string msg;
  EXPECT_LT(heap_growth([&] { msg = error_of([&] { load_mnist(dir_.string(), "train"); }); }), size_t(1) << 20);
  EXPECT_THAT(msg, HasSubstr(path("train-labels-idx1-ubyte.gz") + ": at least 65536 trailing bytes"));
  // A header promising 2^32-1 labels for 10 images is refused without reading the payload.
  write_file(path("train-labels-idx1-ubyte.gz"), gzip_member(idx_bytes(0x801, {0xffffffffu}, {}), 16u << 20), false);
  EXPECT_LT(heap_growth([&] { msg = error_of([&] { load_mnist(dir_.string(), "train"); }); }), size_t(1) << 20);
  EXPECT_THAT(msg, HasSubstr("has 10 images but " + path("train-labels-idx1-ubyte.gz") + " has 4294967295 labels"));
}

// A FIFO would block in open until a writer came; it is refused by its type, as is a directory.
TEST_F(IdxHostile, APathThatIsNotARegularFileIsRefusedBeforeOpening) {
  ASSERT_EQ(mkfifo(path("fifo").c_str(), 0600), 0);
  EXPECT_THAT(error_of([&] { read_idx(path("fifo")); }), HasSubstr(path("fifo") + " is a FIFO, not a regular file"));
  EXPECT_EQ(error_kind_of([&] { read_idx(path("fifo")); }), ErrorKind::data);
  ASSERT_EQ(mkfifo(path("lbl.gz").c_str(), 0600), 0);  // also when found as the .gz
  EXPECT_THAT(error_of([&] { read_idx(path("lbl")); }), HasSubstr(path("lbl.gz") + " is a FIFO"));
  std::filesystem::create_directories(path("dir"));
  EXPECT_THAT(error_of([&] { read_idx(path("dir")); }), HasSubstr(path("dir") + " is a directory, not a regular file"));
  write_file(path("file"), labels10(), false);
  EXPECT_EQ(read_idx(path("file")).bytes.size(), 10u);
}

TEST_F(IdxHostile, ConcatenatedGzipMembersAreOneFile) {
  std::vector<uint8_t> a = gzip_member(idx_bytes(0x801, {4}, {}), 0);
  const std::vector<uint8_t> b = gzip_member({1, 2, 3, 4}, 0);
  a.insert(a.end(), b.begin(), b.end());
  write_file(path("lbl.gz"), a, false);
  EXPECT_EQ(read_idx(path("lbl.gz")).bytes, (std::vector<uint8_t>{1, 2, 3, 4}));
}

TEST_F(IdxHostile, BytesAfterTheGzipStreamAreAnError) {
  std::vector<uint8_t> gz = gzip_member(labels10(), 0);
  write_file(path("ok.gz"), gz, false);
  EXPECT_NO_THROW(read_idx(path("ok.gz")));
  for (size_t junk : {1, 100}) {
    std::vector<uint8_t> bad = gz;
    bad.resize(gz.size() + junk, 'x');
    write_file(path("bad.gz"), bad, false);
    EXPECT_THAT(error_of([&] { read_idx(path("bad.gz")); }),
                HasSubstr(path("bad.gz") + ": unexpected bytes after the gzip stream (after 18 decompressed bytes"));
  }
}

TEST_F(IdxHostile, ACutGzipStreamSaysWhereItEnds) {
  std::vector<uint8_t> gz = gzip_member(idx_bytes(0x803, {100, 10, 10}, std::vector<uint8_t>(10000, 3)), 0);
  gz.erase(gz.end() - 8, gz.end());  // the checksum and length trailer cut off
  write_file(path("cut.gz"), gz, false);
  EXPECT_THAT(error_of([&] { read_idx(path("cut.gz")); }),
              HasSubstr(path("cut.gz") + ": the gzip stream is cut off after 10016 decompressed bytes"));
  EXPECT_EQ(error_kind_of([&] { read_idx(path("cut.gz")); }), ErrorKind::data);
}

TEST_F(IdxHostile, CorruptDeflateDataNamesTheOffset) {
  std::vector<uint8_t> gz = gzip_member(labels10(), 0);
  gz[10] = 0xff;  // the first deflate block header: an invalid block type
  write_file(path("bad.gz"), gz, false);
  EXPECT_THAT(error_of([&] { read_idx(path("bad.gz")); }),
              HasSubstr(path("bad.gz") + ": corrupt gzip stream at decompressed byte offset 0"));
}

TEST(ParseIdx, ReadsRawAndGzipFromMemoryAndNamesTheBufferInErrors) {
  const std::vector<uint8_t> raw = labels10(), gz = gzip_member(labels10(), 0);
  EXPECT_EQ(parse_idx(raw.data(), raw.size()).bytes, parse_idx(gz.data(), gz.size()).bytes);
  EXPECT_EQ(parse_idx(gz.data(), gz.size()).dims, (std::vector<int64_t>{10}));
  EXPECT_THAT(error_of([&] { parse_idx(raw.data(), raw.size() - 1, "shard 3"); }),
              HasSubstr("shard 3: truncated at byte offset 17: header says 10 items (expected 18 bytes)"));
  EXPECT_THAT(error_of([&] { parse_idx(nullptr, 0); }),
              HasSubstr("<memory>: truncated: file has 0 bytes but an IDX header needs at least 4"));
  const std::vector<uint8_t> bomb = gzip_member(labels10(), 8u << 20);
  EXPECT_LT(heap_growth([&] { error_of([&] { parse_idx(bomb.data(), bomb.size()); }); }), size_t(1) << 20);
}

}  // namespace
}  // namespace zt::data
