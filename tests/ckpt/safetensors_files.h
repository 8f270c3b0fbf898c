#pragma once
// Test helpers: a fresh temporary folder per test, and safetensors files written byte by byte.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

namespace zt::ckpt::testing {

class SafetensorsFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = std::filesystem::temp_directory_path() /
           ("zt_ckpt_" + std::to_string(getpid()) + "_" + info->test_suite_name() + "_" + info->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  // A file as the format lays it out: 8-byte little-endian header length, header, data.
  std::string write_raw(const std::string& name, const std::string& header, size_t data_bytes) {
    std::ofstream f(path(name), std::ios::binary);
    const uint64_t n = header.size();
    f.write(reinterpret_cast<const char*>(&n), 8);
    f << header << std::string(data_bytes, '\0');
    return path(name);
  }
  std::filesystem::path dir_;
};

}  // namespace zt::ckpt::testing
