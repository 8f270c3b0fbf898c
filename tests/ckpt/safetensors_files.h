#pragma once
// Test helpers: a fresh temporary folder per test, and safetensors files written byte by byte.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "common/temp_dir.h"

namespace zt::ckpt::testing {

class SafetensorsFiles : public zt::testing_util::TempDirTest {
 protected:
  // A file as the format lays it out: 8-byte little-endian header length, header, data.
  std::string write_raw(const std::string& name, const std::string& header, size_t data_bytes) {
    std::ofstream f(path(name), std::ios::binary);
    const uint64_t n = header.size();
    f.write(reinterpret_cast<const char*>(&n), 8);
    f << header << std::string(data_bytes, '\0');
    return path(name);
  }
};

}  // namespace zt::ckpt::testing
