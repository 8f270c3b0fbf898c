// safetensors files made to hurt: deep nesting, shapes that overflow or are not integers,
// overlapping or out-of-range offsets, duplicate keys, integer weights, non-regular paths; and
// the same parser reading from memory.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

#include "common/error_of.h"
#include "safetensors_files.h"
#include "zt/ckpt/safetensors.h"

namespace zt::ckpt {
namespace {

using ::testing::HasSubstr;
using zt::testing_util::error_kind_of;
using zt::testing_util::error_of;

class SafetensorsHostile : public testing::SafetensorsFiles {
 protected:
  std::string load_error(const std::string& header, size_t data_bytes) {
    const std::string p = write_raw("t.safetensors", header, data_bytes);
    EXPECT_EQ(error_kind_of([&] { load_safetensors(p); }), ErrorKind::checkpoint) << header.substr(0, 200);
    return error_of([&] { load_safetensors(p); });
  }
  // One F32 tensor 'w' with the given shape and offsets.
  static std::string entry(const std::string& shape, const std::string& offsets, const std::string& dtype = "\"F32\"") {
    return R"({"w": {"dtype": )" + dtype + R"(, "shape": )" + shape + R"(, "data_offsets": )" + offsets + "}}";
  }
};

// A recursive dump of this metadata overflowed the stack; now the scan stops at level 4.
TEST_F(SafetensorsHostile, DeeplyNestedMetadataIsRejectedAtTheFormatsDepth) {
  const size_t levels = 200000;
  const std::string deep = R"({"__metadata__": {"a": )" + std::string(levels, '[') + std::string(levels, ']') + "}}";
  EXPECT_THAT(load_error(deep, 0),
              HasSubstr(path("t.safetensors") + ": the JSON header nests deeper than the format's 3 levels at byte "
                                                "offset 32"));
  EXPECT_THAT(load_error(entry("[[2]]", "[0, 8]"), 8), HasSubstr("nests deeper than the format's 3 levels"));
  // Brackets inside strings are text, and three levels are what the format has.
  const std::string p = write_raw("ok.safetensors",
                                  R"({"__metadata__": {"a": "[[[[{{\"]]"}, "w": {"dtype": "F32", "shape": [2], )"
                                  R"("data_offsets": [0, 8]}})",
                                  8);
  EXPECT_EQ(load_safetensors(p).metadata.at("a"), "[[[[{{\"]]");
}

TEST_F(SafetensorsHostile, MetadataMustBeAFlatMapOfStrings) {
  EXPECT_THAT(load_error(R"({"__metadata__": {"n": 3}})", 0),
              HasSubstr(": __metadata__ 'n' is 3; metadata values must be strings"));
  EXPECT_THAT(load_error(R"({"__metadata__": {"o": {"k": "v"}}})", 0), HasSubstr("'o' is an object"));
  EXPECT_THAT(load_error(R"({"__metadata__": "flat"})", 0), HasSubstr("__metadata__ is a string, not an object"));
  const std::string p = write_raw("ok.safetensors", R"({"__metadata__": {"k": "v"}})", 0);
  EXPECT_EQ(load_safetensors(p).metadata.at("k"), "v");
}

// [0, 2^62, 4]: zero bytes, but the strides of such a tensor overflow (a UBSan report).
TEST_F(SafetensorsHostile, AShapeWhoseSizeOverflowsIsRejected) {
  EXPECT_THAT(load_error(entry("[0, 4611686018427387904, 4]", "[0, 0]"), 0),
              HasSubstr("tensor 'w': the shape's size in bytes overflows 63 bits at entry 1"));
  EXPECT_THAT(load_error(entry("[4294967296, 4294967296]", "[0, 8]"), 8), HasSubstr("overflows 63 bits at entry 1"));
  EXPECT_THAT(load_error(entry("[9223372036854775808]", "[0, 8]"), 8),
              HasSubstr("shape entry 0 is 9223372036854775808, not a non-negative integer"));
  EXPECT_THAT(load_error(entry("[1e300]", "[0, 8]"), 8), HasSubstr("shape entry 0 is 1e+300, not a non-negative"));
  const std::string p = write_raw("ok.safetensors", entry("[0, 1073741824, 4]", "[0, 0]"), 0);
  EXPECT_EQ(load_safetensors(p).find("w")->numel(), 0);
}

TEST_F(SafetensorsHostile, ShapeEntriesMustBeNonNegativeIntegers) {
  EXPECT_THAT(load_error(entry("[256.5]", "[0, 1024]"), 1024),
              HasSubstr("tensor 'w': shape entry 0 is 256.5, not a non-negative integer"));
  EXPECT_THAT(load_error(entry("[2, 2.0]", "[0, 16]"), 16), HasSubstr("shape entry 1 is 2.0, not"));
  EXPECT_THAT(load_error(entry("[-2]", "[0, 8]"), 8), HasSubstr("shape entry 0 is -2, not"));
  EXPECT_THAT(load_error(entry(R"(["2"])", "[0, 8]"), 8), HasSubstr("shape entry 0 is a string, not"));
  EXPECT_THAT(load_error(entry("2", "[0, 8]"), 8), HasSubstr("tensor 'w': shape is 2, not an array"));
  EXPECT_NO_THROW(load_safetensors(write_raw("ok", entry("[256]", "[0, 1024]"), 1024)));
}

TEST_F(SafetensorsHostile, OverlappingTensorsAreRejectedNamingBoth) {
  const std::string two = R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},)"
                          R"( "b": {"dtype": "F32", "shape": [4], "data_offsets": [8, 24]}})";
  EXPECT_THAT(load_error(two, 24), HasSubstr("tensors 'a' [0, 16) and 'b' [8, 24) overlap in the data section"));
  const std::string same = R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},)"
                           R"( "b": {"dtype": "I32", "shape": [2], "data_offsets": [0, 8]}})";
  EXPECT_THAT(load_error(same, 8), HasSubstr("tensors 'a' [0, 8) and 'b' [0, 8) overlap"));
  const std::string inside = R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},)"
                             R"( "e": {"dtype": "F32", "shape": [0], "data_offsets": [8, 8]}})";
  EXPECT_THAT(load_error(inside, 16), HasSubstr("tensors 'a' [0, 16) and 'e' [8, 8) overlap"));
}

// Tensors come in the order of their data, whatever the order of the header's keys.
TEST_F(SafetensorsHostile, TensorsAreInFileOrderOfOffsets) {
  const std::string p = write_raw("o.safetensors",
                                  R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]},)"
                                  R"( "b": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},)"
                                  R"( "c": {"dtype": "F32", "shape": [0], "data_offsets": [16, 16]}})",
                                  16);
  LoadedTensors got = load_safetensors(p);
  ASSERT_EQ(got.tensors.size(), 3u);
  EXPECT_EQ(got.tensors[0].first, "b");
  EXPECT_EQ(got.tensors[1].first, "a");
  EXPECT_EQ(got.tensors[2].first, "c");
}

TEST_F(SafetensorsHostile, DuplicateKeysAreRejected) {
  const std::string dup = R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},)"
                          R"( "w": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]}})";
  EXPECT_THAT(load_error(dup, 16), HasSubstr(": duplicate key 'w' in the JSON header"));
  EXPECT_THAT(load_error(entry("[2]", "[0, 8]").insert(7, R"("dtype": "I32", )"), 8),
              HasSubstr("duplicate key 'dtype'"));
}

TEST_F(SafetensorsHostile, OffsetsOutOfRangeAreRejected) {
  EXPECT_THAT(load_error(entry("[2]", "[0, 8]"), 4),
              HasSubstr("tensor 'w' data_offsets [0, 8] out of range (data section is 4 bytes)"));
  EXPECT_THAT(load_error(entry("[0]", "[8, 4]"), 8), HasSubstr("data_offsets [8, 4] out of range"));
  EXPECT_THAT(load_error(entry("[2]", "[-1, 7]"), 8), HasSubstr("data_offsets[0] is -1, not a non-negative integer"));
  EXPECT_THAT(load_error(entry("[2]", "[0, 8, 16]"), 16), HasSubstr("data_offsets must be an array [begin, end]"));
  EXPECT_THAT(load_error(entry("[3]", "[0, 8]"), 8), HasSubstr("tensor 'w' has 8 bytes but shape [3] needs 12"));
}

TEST_F(SafetensorsHostile, BadHeaderLengthsAreRejected) {
  { std::ofstream(path("short")) << "abc"; }
  EXPECT_THAT(error_of([&] { load_safetensors(path("short")); }),
              HasSubstr(path("short") + ": file of 3 bytes is too short for the 8-byte header length"));
  {
    std::ofstream f(path("long"), std::ios::binary);
    const uint64_t n = 1000;
    f.write(reinterpret_cast<const char*>(&n), 8);
    f << "{}";
  }
  EXPECT_THAT(error_of([&] { load_safetensors(path("long")); }),
              HasSubstr(path("long") + ": header length 1000 at byte 0 exceeds the file size 10"));
  {  // a sparse 200 MB file claiming a 150 MB header: refused before it is read
    std::ofstream f(path("huge"), std::ios::binary);
    const uint64_t n = 150'000'000;
    f.write(reinterpret_cast<const char*>(&n), 8);
  }
  std::filesystem::resize_file(path("huge"), 200'000'000);
  EXPECT_THAT(error_of([&] { load_safetensors(path("huge")); }),
              HasSubstr("header length 150000000 at byte 0 exceeds the format's limit of 100000000 bytes"));
  EXPECT_EQ(error_kind_of([&] { load_safetensors(path("huge")); }), ErrorKind::checkpoint);
}

TEST_F(SafetensorsHostile, UnknownOrMistypedDtypesAreRejected) {
  EXPECT_THAT(load_error(entry("[2]", "[0, 2]", R"("F8_E4M3")"), 2),
              HasSubstr("tensor 'w' has unsupported dtype 'F8_E4M3' (supported: F32, BF16, F16, I32, I64)"));
  EXPECT_THAT(load_error(entry("[2]", "[0, 8]", "5"), 8), HasSubstr("tensor 'w': dtype is 5, not a string"));
  EXPECT_THAT(load_error(R"({"w": [1]})", 0), HasSubstr("tensor 'w' is an array, not an object"));
  EXPECT_THAT(load_error(R"({"w": {"dtype": "F32", "shape": [2]}})", 8), HasSubstr("tensor 'w' has no 'data_offsets'"));
}

// Found by fuzzing: the parser reports such a number as out_of_range, not as a parse error.
TEST_F(SafetensorsHostile, ANumberBeyondADoubleIsAMalformedHeader) {
  EXPECT_THAT(load_error(R"({"__metadata__": 3E333333})", 0),
              HasSubstr(": malformed JSON header: [json.exception.out_of_range.406] number overflow"));
  EXPECT_THAT(load_error(entry("[1E400]", "[0, 8]"), 8), HasSubstr("number overflow parsing '1E400'"));
}

// eval loads weights into float parameters: an integer tensor of the right shape is refused.
TEST_F(SafetensorsHostile, WeightsMustBePresentFloatingAndOfTheModelsShape) {
  save_safetensors(path("m.safetensors"), {{"w", Tensor::zeros({2, 3})},
                                           {"h", Tensor::zeros({2, 3}).to(DType::bf16)},
                                           {"i", Tensor::from_ints({1, 2, 3, 4, 5, 6}, {2, 3})}});
  LoadedTensors got = load_safetensors(path("m.safetensors"));
  EXPECT_EQ(got.weight("w", {2, 3}).dtype(), DType::f32);
  EXPECT_EQ(got.weight("h", {2, 3}).dtype(), DType::bf16);
  EXPECT_THAT(error_of([&] {
                got.weight("i", {2, 3});
              }),
              HasSubstr(path("m.safetensors") + ": tensor 'i' has dtype I32; weights must be F32, BF16 or F16"));
  EXPECT_THAT(error_of([&] {
                got.weight("w", {3, 2});
              }),
              HasSubstr(path("m.safetensors") + ": tensor 'w' has shape [2, 3], the model expects [3, 2]"));
  EXPECT_THAT(error_of([&] { got.weight("x", {2, 3}); }), HasSubstr(path("m.safetensors") + " has no tensor 'x'"));
  EXPECT_EQ(error_kind_of([&] { got.weight("i", {2, 3}); }), ErrorKind::checkpoint);
}

// Opening a FIFO for reading blocks until a writer comes; it is refused by its type instead.
// (A helper opens the other end after 2 s, so a regression fails instead of hanging.)
TEST_F(SafetensorsHostile, APathThatIsNotARegularFileIsRefusedBeforeOpening) {
  const std::string fifo = path("w.safetensors");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  std::atomic<bool> done{false};
  std::thread unblock([&] {
    const auto start = std::chrono::steady_clock::now();
    for (auto t = start; !done && t < start + std::chrono::seconds(5); t = std::chrono::steady_clock::now()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      if (t < start + std::chrono::seconds(2)) continue;
      if (const int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK); fd >= 0) return (void)::close(fd);
    }
  });
  const auto t0 = std::chrono::steady_clock::now();
  std::string msg;
  ErrorKind kind = ErrorKind::internal;
  try {
    load_safetensors(fifo);  // once: the helper unblocks one open at most
  } catch (const Error& e) {
    msg = e.what(), kind = e.kind();
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  done = true;
  unblock.join();
  EXPECT_LT(secs, 1.0);
  EXPECT_THAT(msg, HasSubstr(fifo + " is a FIFO, not a regular file"));
  EXPECT_EQ(kind, ErrorKind::checkpoint);
  EXPECT_THAT(error_of([&] { load_safetensors(dir_.string()); }), HasSubstr(" is a directory, not a regular file"));
}

TEST_F(SafetensorsHostile, ParsesFromMemoryAsFromAFile) {
  save_safetensors(path("m.safetensors"), {{"w", Tensor::from_vector({1.f, 2.f}, {2})}}, {{"k", "v"}});
  std::ifstream f(path("m.safetensors"), std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  LoadedTensors got = parse_safetensors(bytes.data(), bytes.size(), "buffer");
  EXPECT_EQ(got.source, "buffer");
  EXPECT_EQ(got.metadata.at("k"), "v");
  EXPECT_EQ(got.weight("w", {2}).to_vector(), (std::vector<float>{1.f, 2.f}));
  EXPECT_THAT(error_of([&] { parse_safetensors(bytes.data(), bytes.size() - 1, "buffer"); }),
              HasSubstr("buffer: tensor 'w' data_offsets [0, 8] out of range (data section is 7 bytes)"));
  EXPECT_THAT(error_of([&] { parse_safetensors(nullptr, 0); }), HasSubstr("<memory>: file of 0 bytes is too short"));
}

}  // namespace
}  // namespace zt::ckpt
