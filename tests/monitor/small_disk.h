#pragma once
// A full disk for the monitors' write errors: a 64 KiB tmpfs mounted on the test's folder and
// filled up (root here and in CI; skipped where mount is not permitted).
#include <gtest/gtest.h>
#include <sys/mount.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "common/temp_dir.h"

namespace zt::monitor::test_util {

class SmallDiskTest : public testing_util::TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    mnt_ = path("disk");
    std::filesystem::create_directories(mnt_);
    if (::mount("tmpfs", mnt_.c_str(), "tmpfs", 0, "size=64k") != 0)
      GTEST_SKIP() << "cannot mount a tmpfs (" << std::strerror(errno) << "): the full-disk cases need root";
    mounted_ = true;
  }
  void TearDown() override {
    if (mounted_) ::umount2(mnt_.c_str(), MNT_DETACH);
    TempDirTest::TearDown();
  }
  // Fills what is left of the disk with a filler file, block by block and then byte by byte.
  void fill() {
    FILE* f = std::fopen((mnt_ + "/filler").c_str(), "wb");
    ASSERT_NE(f, nullptr);
    std::setvbuf(f, nullptr, _IONBF, 0);
    const std::vector<char> block(4096, 'x');
    while (std::fwrite(block.data(), 1, block.size(), f) == block.size()) {
    }
    while (std::fwrite(block.data(), 1, 1, f) == 1) {
    }
    std::fclose(f);
  }
  std::string mnt_;
  bool mounted_ = false;
};

}  // namespace zt::monitor::test_util
