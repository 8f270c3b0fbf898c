// safetensors: a round trip, and every malformed file reaching the caller as
// ErrorKind::checkpoint with the file named.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "common/error_of.h"
#include "safetensors_files.h"
#include "zt/ckpt/safetensors.h"

namespace zt::ckpt {
namespace {

using ::testing::HasSubstr;
using zt::testing_util::error_kind_of;
using zt::testing_util::error_of;

class Safetensors : public testing::SafetensorsFiles {};

TEST_F(Safetensors, RoundTripKeepsValuesShapesAndMetadata) {
  Tensor w = Tensor::from_vector({1.5f, -2.f, 3.25f, 0.f, 7.f, -1e-3f}, {2, 3});
  Tensor b = Tensor::from_ints({4, -5}, {2});
  save_safetensors(path("m.safetensors"), {{"w", w}, {"b", b}}, {{"format", "zerotrain"}});
  LoadedTensors got = load_safetensors(path("m.safetensors"));
  ASSERT_EQ(got.tensors.size(), 2u);
  ASSERT_NE(got.find("w"), nullptr);
  ASSERT_NE(got.find("b"), nullptr);
  EXPECT_EQ(got.find("w")->shape(), (Shape{2, 3}));
  EXPECT_EQ(std::memcmp(got.find("w")->raw_data(), w.raw_data(), w.nbytes()), 0);
  EXPECT_EQ(got.find("b")->dtype(), DType::i32);
  EXPECT_EQ(std::memcmp(got.find("b")->raw_data(), b.raw_data(), b.nbytes()), 0);
  EXPECT_EQ(got.metadata.at("format"), "zerotrain");
  EXPECT_FALSE(std::filesystem::exists(path("m.safetensors.tmp")));
}

TEST_F(Safetensors, AMalformedFileIsACheckpointError) {
  const std::string p = write_raw("bad.safetensors", R"({"w": {"dtype": "F32", "shape": [2],)", 8);
  EXPECT_EQ(error_kind_of([&] { load_safetensors(p); }), ErrorKind::checkpoint);
  EXPECT_THAT(error_of([&] { load_safetensors(p); }), HasSubstr(p + ": malformed JSON header at byte"));
  // The same entry, well formed, loads.
  const std::string good =
      write_raw("good.safetensors", R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})", 8);
  EXPECT_EQ(load_safetensors(good).tensors.size(), 1u);
}

TEST_F(Safetensors, EveryMalformedLayoutIsACheckpointError) {
  auto kind = [](const std::string& p) { return error_kind_of([&] { load_safetensors(p); }); };
  const auto entry = [](const std::string& body) { return R"({"w": {)" + body + "}}"; };
  EXPECT_EQ(kind(path("missing.safetensors")), ErrorKind::checkpoint);
  { std::ofstream(path("short")) << "abc"; }
  EXPECT_EQ(kind(path("short")), ErrorKind::checkpoint);
  {  // a header length past the end of the file
    std::ofstream f(path("long"), std::ios::binary);
    const uint64_t n = 1000;
    f.write(reinterpret_cast<const char*>(&n), 8);
  }
  EXPECT_EQ(kind(path("long")), ErrorKind::checkpoint);
  EXPECT_EQ(kind(write_raw("array", "[1, 2]", 0)), ErrorKind::checkpoint);
  EXPECT_EQ(kind(write_raw("dtype", entry(R"("dtype": "F8", "shape": [2], "data_offsets": [0, 2])"), 2)),
            ErrorKind::checkpoint);
  EXPECT_EQ(kind(write_raw("range", entry(R"("dtype": "F32", "shape": [2], "data_offsets": [0, 8])"), 4)),
            ErrorKind::checkpoint);
  EXPECT_EQ(kind(write_raw("size", entry(R"("dtype": "F32", "shape": [3], "data_offsets": [0, 8])"), 8)),
            ErrorKind::checkpoint);
  EXPECT_EQ(kind(write_raw("neg", entry(R"("dtype": "F32", "shape": [-2], "data_offsets": [0, 8])"), 8)),
            ErrorKind::checkpoint);
  EXPECT_EQ(
      kind(write_raw("huge", entry(R"("dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 8])"), 8)),
      ErrorKind::checkpoint);
  EXPECT_EQ(kind(write_raw("field", entry(R"("dtype": "F32", "shape": [2])"), 8)), ErrorKind::checkpoint);
}

TEST_F(Safetensors, AnUnwritablePathIsACheckpointError) {
  const std::string p = path("no/such/dir/m.safetensors");
  EXPECT_EQ(error_kind_of([&] { save_safetensors(p, {{"w", Tensor::zeros({2})}}); }), ErrorKind::checkpoint);
  EXPECT_THAT(error_of([&] { save_safetensors(p, {{"w", Tensor::zeros({2})}}); }), HasSubstr(p));
}

}  // namespace
}  // namespace zt::ckpt
