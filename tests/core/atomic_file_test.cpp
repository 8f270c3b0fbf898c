// Note [atomic files]: whole files or none, under unique temporary names, never written into
// anything but a regular file.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "common/error_of.h"
#include "common/temp_dir.h"
#include "zt/core/atomic_file.h"

namespace zt {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using testing_util::error_kind_of;
using testing_util::error_of;

class AtomicFileTest : public testing_util::TempDirTest {
 protected:
  std::string read(const std::string& name) const {
    std::ifstream f(path(name), std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(f)), {});
  }
  size_t entries() const { return size_t(std::distance(fs::directory_iterator(dir_), fs::directory_iterator())); }
};

TEST_F(AtomicFileTest, CommitReplacesTheFileWholeAndLeavesNoTemporary) {
  write_file_atomic(path("out"), "old", ErrorKind::checkpoint, "[test]");
  AtomicFile f(path("out"));
  f.write("new ");
  f.write(std::string(10000, 'x'));
  EXPECT_TRUE(fs::exists(f.temp_path()));
  EXPECT_EQ(read("out"), "old");  // nothing visible before the rename
  f.commit();
  EXPECT_EQ(read("out"), "new " + std::string(10000, 'x'));
  EXPECT_EQ(entries(), 1u);
}

TEST_F(AtomicFileTest, DroppedUncommittedItLeavesTheDestinationAndNoTemporary) {
  write_file_atomic(path("out"), "old", ErrorKind::checkpoint, "[test]");
  {
    AtomicFile f(path("out"));
    f.write("half");
    f.finish();  // even written and synced
  }
  EXPECT_EQ(read("out"), "old");
  EXPECT_EQ(entries(), 1u);
}

TEST_F(AtomicFileTest, TemporaryNamesAreUniquePerCallAndRecognised) {
  std::set<std::string> names;
  for (int i = 0; i < 100; ++i) names.insert(unique_temp_path("m.safetensors"));
  EXPECT_EQ(names.size(), 100u);
  const std::string one = *names.begin();
  EXPECT_THAT(one, HasSubstr(".tmp." + std::to_string(::getpid()) + "."));
  EXPECT_TRUE(is_temp_name_of(one, "m.safetensors"));
  EXPECT_FALSE(is_temp_name_of(one, "summary.json"));
  EXPECT_FALSE(is_temp_name_of("m.safetensors.tmp", "m.safetensors"));  // the old fixed name: not ours
  EXPECT_FALSE(is_temp_name_of("m.safetensors.tmp.12.0123456789abcdeg", "m.safetensors"));
  EXPECT_FALSE(is_temp_name_of("m.safetensors.tmp.x2.0123456789abcdef", "m.safetensors"));
  EXPECT_FALSE(is_temp_name_of("m.safetensors.tmp.12.0123456789abcde", "m.safetensors"));
  EXPECT_TRUE(is_temp_name_of("m.safetensors.tmp.12.0123456789abcdef", "m.safetensors"));
}

// A FIFO would block the open for ever: it is named, never opened; so are folders and devices.
TEST_F(AtomicFileTest, ANonRegularDestinationIsAnErrorNamingIt) {
  ASSERT_EQ(::mkfifo(path("fifo").c_str(), 0644), 0);
  fs::create_directory(path("dir"));
  fs::create_symlink("/dev/null", path("dev"));
  EXPECT_THAT(error_of([&] { AtomicFile f(path("fifo")); }),
              HasSubstr(path("fifo") + " is a FIFO, not a regular file"));
  EXPECT_THAT(error_of([&] { AtomicFile f(path("dir")); }), HasSubstr(path("dir") + " is a directory"));
  EXPECT_THAT(error_of([&] { AtomicFile f(path("dev"), ErrorKind::config, "[x]"); }),
              HasSubstr("[x] " + path("dev") + " is a character device"));
  EXPECT_EQ(error_kind_of([&] { AtomicFile f(path("dev"), ErrorKind::config); }), ErrorKind::config);
  EXPECT_EQ(entries(), 3u);  // no temporary left by the failed ones
}

TEST_F(AtomicFileTest, LinksToRegularFilesAndDanglingLinksAreReplacedByTheFile) {
  write_file_atomic(path("target"), "t", ErrorKind::checkpoint, "[test]");
  fs::create_symlink(path("target"), path("link"));
  fs::create_symlink(path("nowhere"), path("dangling"));
  write_file_atomic(path("link"), "L", ErrorKind::checkpoint, "[test]");
  write_file_atomic(path("dangling"), "D", ErrorKind::checkpoint, "[test]");
  EXPECT_EQ(read("link"), "L");
  EXPECT_EQ(read("dangling"), "D");
  EXPECT_EQ(read("target"), "t");  // rename replaces the link, not what it points to
}

TEST_F(AtomicFileTest, AMissingFolderIsAnErrorOfTheGivenKindNamingThePath) {
  const std::string p = path("no/such/out");
  EXPECT_THAT(error_of([&] { write_file_atomic(p, "x", ErrorKind::checkpoint, "[test]"); }), HasSubstr(p));
  EXPECT_EQ(error_kind_of([&] { AtomicFile f(p, ErrorKind::data); }), ErrorKind::data);
}

// Write errors (a full disk) are tested on a tmpfs in tests/faults.

}  // namespace
}  // namespace zt
