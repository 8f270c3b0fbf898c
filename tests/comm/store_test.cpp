// Rendezvous stores (zt/comm/store.h): the file store on a temporary folder, and the group store
// on the one-process groups.
#include "zt/comm/store.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "common/temp_dir.h"
#include "zt/comm/group.h"

namespace zt::comm {
namespace {

using Clock = std::chrono::steady_clock;

class FileStoreTest : public testing_util::TempDirTest {};

// Runs f, which must throw zt::Error; returns it for the caller to inspect.
template <typename F>
Error thrown_by(F f) {
  try {
    f();
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "no zt::Error thrown";
  return Error("");
}

TEST_F(FileStoreTest, SetThenGetReturnsTheValueByteForByte) {
  FileStore store(dir_.string());
  const std::string id(std::string("\0\x01\xff id bytes\n", 14) + std::string(114, 'x'));  // 128 bytes, NULs too
  store.set("run1.nccl_id", id);
  EXPECT_EQ(store.get("run1.nccl_id", 1.0), id);
  store.set("empty", "");
  EXPECT_EQ(store.get("empty", 1.0), "");
  store.set("empty", "overwritten");
  EXPECT_EQ(store.get("empty", 1.0), "overwritten");
  EXPECT_EQ(make_file_store(dir_.string())->get("run1.nccl_id", 1.0), id);  // another store, same folder
}

TEST_F(FileStoreTest, SetLeavesOnlyTheKeyFileBehind) {
  FileStore store(dir_.string());
  store.set("k", "v");
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir_)) names.push_back(e.path().filename().string());
  EXPECT_EQ(names, std::vector<std::string>{"k"});  // the temporary was renamed, not copied
}

TEST_F(FileStoreTest, AGetThatTimesOutThrowsACommErrorNamingTheKey) {
  FileStore store(dir_.string());
  const auto start = Clock::now();
  const Error e = thrown_by([&] { store.get("never.set", 0.2); });
  const double waited = std::chrono::duration<double>(Clock::now() - start).count();
  EXPECT_EQ(e.kind(), ErrorKind::comm);
  EXPECT_EQ(std::string(e.what()),
            "[comm] store: key 'never.set' did not appear in " + dir_.string() + " within 0.2 s");
  EXPECT_GE(waited, 0.2);
}

TEST_F(FileStoreTest, BadKeysAreRejectedBeforeTouchingTheFolder) {
  FileStore store(dir_.string());
  const std::vector<std::string> bad = {
      "", "a/b", "/abs", "..", "x..y", ".hidden", std::string(201, 'k'), std::string("nul\0byte", 8)};
  for (const std::string& key : bad) {
    SCOPED_TRACE(key);
    const Error set_error = thrown_by([&] { store.set(key, "v"); });
    EXPECT_EQ(set_error.kind(), ErrorKind::invalid_argument);
    EXPECT_NE(std::string(set_error.what()).find("[comm] store: invalid key"), std::string::npos);
    EXPECT_EQ(thrown_by([&] { store.get(key, 0.01); }).kind(), ErrorKind::invalid_argument);
  }
  EXPECT_TRUE(std::filesystem::is_empty(dir_));
  store.set(std::string(200, 'k'), "longest");  // the limit itself is fine
  EXPECT_EQ(store.get(std::string(200, 'k'), 1.0), "longest");
}

TEST_F(FileStoreTest, TwoThreadsRendezvousWhenTheValueArrivesLate) {
  FileStore getter(dir_.string()), setter(dir_.string());
  std::thread late([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    setter.set("rank0.nccl_id", "the id");
  });
  const auto start = Clock::now();
  const std::string got = getter.get("rank0.nccl_id", 10.0);
  const double waited = std::chrono::duration<double>(Clock::now() - start).count();
  late.join();
  EXPECT_EQ(got, "the id");
  EXPECT_GE(waited, 0.1);
}

TEST_F(FileStoreTest, TheFolderIsCreatedAndMustBeAFolder) {
  const std::string nested = path("a/b/c");
  FileStore store(nested);
  EXPECT_TRUE(std::filesystem::is_directory(nested));
  store.set("k", "v");
  EXPECT_EQ(store.get("k", 1.0), "v");

  const std::string file = write("not_a_folder", "x");
  const Error e = thrown_by([&] { FileStore bad(file); });
  EXPECT_EQ(e.kind(), ErrorKind::comm);
  EXPECT_NE(std::string(e.what()).find("[comm] store: cannot create folder " + file), std::string::npos);
}

TEST(GroupStore, TheOneSetterPassesAndAGetThatNoRankSetsFails) {
  // Fake peers do what this rank does, so here every rank sets alike: one setter per rank 0.
  auto group = make_fake_group(0, 3);
  auto store = make_group_store(group);
  store->set("world.gpu.0", std::string("host\n0000:3b:00.0\0", 19));
  EXPECT_EQ(group->last_seq(), 2u);  // an all_reduce to find the setter, a broadcast of the bytes

  const Error e = thrown_by([&] { store->get("world.nccl_id", 1.0); });
  EXPECT_EQ(e.kind(), ErrorKind::comm);
  EXPECT_STREQ(e.what(),
               "[comm] store: no rank set key 'world.nccl_id' (with a group store one rank sets each key while the "
               "others get it)");
}

TEST(GroupStore, OneRankAloneSetsWithoutABroadcastAndChecksKeys) {
  auto group = make_group("local");
  auto store = make_group_store(group);
  store->set("k", "v");
  EXPECT_EQ(group->last_seq(), 1u);  // one rank: nothing to broadcast
  EXPECT_EQ(thrown_by([&] { store->set("a/b", "v"); }).kind(), ErrorKind::invalid_argument);
  EXPECT_EQ(group->last_seq(), 1u);  // rejected before any collective
}

}  // namespace
}  // namespace zt::comm
