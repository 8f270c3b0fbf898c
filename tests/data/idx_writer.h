#pragma once
// Test helpers: a fresh temporary folder per test, and IDX files written raw or gzipped.
#include <gtest/gtest.h>

#include <unistd.h>
#include <zlib.h>
#include "common/temp_dir.h"

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace zt::data::testing {

inline std::vector<uint8_t> idx_bytes(uint32_t magic, const std::vector<uint32_t>& dims,
                                      const std::vector<uint8_t>& payload) {
  std::vector<uint8_t> b;
  auto put = [&](uint32_t v) {
    for (int s = 24; s >= 0; s -= 8) b.push_back(uint8_t(v >> s));
  };
  put(magic);
  for (uint32_t d : dims) put(d);
  b.insert(b.end(), payload.begin(), payload.end());
  return b;
}

inline void write_file(const std::string& path, const std::vector<uint8_t>& bytes, bool gz) {
  if (gz) {
    gzFile f = gzopen(path.c_str(), "wb");
    ASSERT_NE(f, nullptr) << path;
    if (!bytes.empty()) {
      ASSERT_EQ(gzwrite(f, bytes.data(), unsigned(bytes.size())), int(bytes.size()));
    }
    ASSERT_EQ(gzclose(f), Z_OK);
  } else {
    std::ofstream os(path, std::ios::binary);
    os.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
    ASSERT_TRUE(os.good()) << path;
  }
}

using TempDirTest = zt::testing_util::TempDirTest;

}  // namespace zt::data::testing
