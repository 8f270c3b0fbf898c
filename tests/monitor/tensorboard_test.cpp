// Note [event files]: what DeepSpeed's tensorboard monitor writes, read back by a reader written
// from the format alone (event_reader.h).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "common/error_of.h"
#include "common/temp_dir.h"
#include "event_reader.h"
#include "small_disk.h"
#include "zt/monitor/crc32c.h"
#include "zt/monitor/tensorboard.h"

namespace zt::monitor {
namespace {

namespace fs = std::filesystem;
using test_util::read_events;
using test_util::read_records;
using ::testing::HasSubstr;
using testing_util::error_kind_of;
using testing_util::error_of;

std::string bytes_of(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), {});
}

std::vector<std::string> files_in(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().string());
  return out;
}

// RFC 3720's vectors for CRC-32C, and the common check value.
TEST(Crc32cTest, MatchesTheKnownVectors) {
  EXPECT_EQ(crc32c("123456789"), 0xE3069283u);
  EXPECT_EQ(crc32c(""), 0u);
  EXPECT_EQ(crc32c(std::string(32, '\0')), 0x8A9136AAu);
  EXPECT_EQ(crc32c(std::string(32, '\xff')), 0x62A8AB43u);
  std::string up, down;
  for (int i = 0; i < 32; ++i) up.push_back(char(i)), down.push_back(char(31 - i));
  EXPECT_EQ(crc32c(up), 0x46DD794Eu);
  EXPECT_EQ(crc32c(down), 0x113FDB5Cu);
  EXPECT_EQ(crc32c("56789", 5, crc32c("1234")), 0xE3069283u);  // continued over pieces
  EXPECT_EQ(mask_crc(0), 0xa282ead8u);
  EXPECT_EQ(mask_crc(0x00008000u), 0xa282ead9u);  // the rotation: bit 15 to bit 0
}

// The bytes pinned by hand from event.proto and summary.proto, so the writer and the reader
// cannot agree on a wrong encoding.
std::string from_hex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size();)
    if (hex[i] == ' ') {
      ++i;
    } else {
      out.push_back(char(std::stoi(hex.substr(i, 2), nullptr, 16)));
      i += 2;
    }
  return out;
}

TEST(TensorBoardEncodingTest, AScalarEventHasTheProtobufBytesOfEventProto) {
  const std::string wall_time = "09 000000000000f83f";   // field 1, fixed64: 1.5
  const std::string summary = "2a 0a  0a 08  0a 01 61";  // field 5 { value { tag "a"
  EXPECT_EQ(scalar_event(1.5, "a", 2.0, 3), from_hex(wall_time + "10 03" + summary + "15 00000040"));  // 2.0f
  // Step 0 is left out (proto3); a zero value is not (simple_value sits in a oneof).
  EXPECT_EQ(scalar_event(1.5, "a", 0.0, 0), from_hex(wall_time + summary + "15 00000000"));
  // A negative step: ten varint bytes, two's complement.
  EXPECT_EQ(scalar_event(1.5, "a", 0.0, -1), from_hex(wall_time + "10 ffffffffffffffffff01" + summary + "15 00000000"));
}

TEST(TensorBoardEncodingTest, ARecordIsLengthCrcDataCrc) {
  const std::string rec = tfrecord("123456789");
  ASSERT_EQ(rec.size(), 8 + 4 + 9 + 4u);
  EXPECT_EQ(rec.substr(0, 8), std::string("\x09\0\0\0\0\0\0\0", 8));
  EXPECT_EQ(uint32_t(test_util::le(rec, 8, 4)), mask_crc(crc32c(rec.data(), 8)));
  EXPECT_EQ(rec.substr(12, 9), "123456789");
  EXPECT_EQ(uint32_t(test_util::le(rec, 21, 4)), mask_crc(0xE3069283u));
}

using TensorBoardMonitorTest = testing_util::TempDirTest;

// A clock that ticks one second a reading from a fixed epoch: each write's wall_time is known.
double g_tick = 0;
double ticking_clock() { return 1.7e9 + g_tick++; }

TEST_F(TensorBoardMonitorTest, TheFileIsNamedAsTorchsSummaryWriterNamesIt) {
  g_tick = 0;
  TensorBoardMonitor m(path("out"), "job", ticking_clock);
  EXPECT_EQ(m.dir(), path("out") + "/job");
  const std::vector<std::string> files = files_in(path("out/job"));
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(files[0], m.file());
  char host[256] = "";
  ::gethostname(host, sizeof host - 1);
  // events.out.tfevents.<10 digits>.<host>.<pid>.<n>
  const std::string name = fs::path(m.file()).filename().string(), head = "events.out.tfevents.";
  ASSERT_GT(name.size(), head.size() + 11) << name;
  EXPECT_EQ(name.substr(0, head.size()), head);
  const std::string secs = name.substr(head.size(), 10), rest = name.substr(head.size() + 10);
  EXPECT_EQ(secs.find_first_not_of("0123456789"), std::string::npos) << name;
  EXPECT_EQ(secs, "1700000000") << name;  // the clock's reading when the file was made
  const std::string mid = "." + std::string(host) + "." + std::to_string(::getpid()) + ".";
  EXPECT_EQ(rest.substr(0, mid.size()), mid) << name;
  EXPECT_EQ(rest.substr(mid.size()).find_first_not_of("0123456789"), std::string::npos) << name;
  // A second writer in the same second and folder gets its own file.
  g_tick = 0;  // the same second
  TensorBoardMonitor again(path("out"), "job", ticking_clock);
  EXPECT_NE(again.file(), m.file());
  EXPECT_EQ(files_in(path("out/job")).size(), 2u);
}

TEST_F(TensorBoardMonitorTest, EveryScalarReadsBackWithItsTagValueStepAndWallTime) {
  g_tick = 0;
  TensorBoardMonitor m(path("out") + "/", "job", ticking_clock);  // a trailing '/' as os.path.join takes it
  const std::vector<Event> events = {{"Train/Samples/train_loss", 2.3125, 32},
                                     {"Train/Samples/lr", 1e-4, 32},
                                     {"Train/Samples/loss_scale", 65536, 0},
                                     {"zero", 0.0, std::numeric_limits<int64_t>::max()},
                                     {"négatif", -1.5, -7},
                                     {"inf", std::numeric_limits<double>::infinity(), 1}};
  m.write_events(events);
  m.write_scalar("Train/Samples/train_loss", 2.25, 64);
  m.write_events({});
  m.flush();

  const std::vector<test_util::DecodedEvent> got = read_events(m.file());
  ASSERT_EQ(got.size(), 1 + events.size() + 1);
  EXPECT_EQ(got[0].file_version, "brain.Event:2");
  EXPECT_TRUE(got[0].values.empty());
  EXPECT_EQ(got[0].step, 0);
  // The file_version record at the first reading, the first batch's events at the second, the
  // single scalar at the third (an empty batch writes nothing and reads no clock).
  for (size_t i = 0; i < got.size(); ++i) {
    const double want = 1.7e9 + (i == 0 ? 0 : i <= events.size() ? 1 : 2);
    EXPECT_EQ(got[i].wall_time, want) << i;
    if (i > 0) {
      EXPECT_GE(got[i].wall_time, got[i - 1].wall_time) << i;
    }
  }
  std::vector<Event> all = events;
  all.push_back({"Train/Samples/train_loss", 2.25, 64});
  for (size_t i = 0; i < all.size(); ++i) {
    const test_util::DecodedEvent& e = got[i + 1];
    EXPECT_FALSE(e.file_version) << i;
    ASSERT_EQ(e.values.size(), 1u) << i;
    EXPECT_EQ(e.values[0].tag, all[i].tag);
    EXPECT_EQ(e.values[0].value, float(all[i].value)) << all[i].tag;  // rounded to float, as add_scalar
    EXPECT_EQ(e.step, all[i].step) << all[i].tag;
  }
}

// Any one damaged byte anywhere in the file is caught by a CRC (or the framing it protects).
TEST_F(TensorBoardMonitorTest, AFileWithAFlippedByteIsRejected) {
  std::string file;
  {
    TensorBoardMonitor m(path("out"), "job");
    m.write_events({{"a", 1.0, 1}, {"b/c", 2.0, 2}});
    file = m.file();
  }
  const std::string good = bytes_of(file);
  ASSERT_EQ(read_records(file).size(), 3u);
  for (size_t i = 0; i < good.size(); ++i) {
    std::string bad = good;
    bad[i] = char(bad[i] ^ 0x20);
    std::ofstream(file, std::ios::binary | std::ios::trunc) << bad;
    EXPECT_THROW(read_records(file), std::runtime_error) << "byte " << i;
  }
  std::string bad = good;
  bad[good.size() - 10] = char(bad[good.size() - 10] ^ 1);  // inside the last record's data
  std::ofstream(file, std::ios::binary | std::ios::trunc) << bad;
  try {
    read_records(file);
    ADD_FAILURE() << "a damaged record was read";
  } catch (const std::runtime_error& e) {
    EXPECT_THAT(e.what(), HasSubstr("data CRC mismatch"));
  }
}

// A run killed without any chance to clean up leaves every record it wrote, whole.
TEST_F(TensorBoardMonitorTest, AKilledRunLeavesEveryRecordReadable) {
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    try {
      TensorBoardMonitor m(path("out"), "job");
      for (int step = 1; step <= 100; ++step) m.write_scalar("loss", 1.0 / step, step);
      ::kill(::getpid(), SIGKILL);
    } catch (...) {
    }
    ::_exit(1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  const std::vector<std::string> files = files_in(path("out/job"));
  ASSERT_EQ(files.size(), 1u);
  const std::vector<test_util::DecodedEvent> got = read_events(files[0]);
  ASSERT_EQ(got.size(), 101u);
  EXPECT_EQ(got[100].step, 100);
  EXPECT_EQ(got[100].values.at(0).value, float(1.0 / 100));
}

TEST_F(TensorBoardMonitorTest, AnUnwritableOutputPathIsOneErrorNamingTheFolder) {
  write("file", "not a folder");
  const std::string msg = error_of([&] { TensorBoardMonitor m(path("file"), "job"); });
  EXPECT_THAT(msg, HasSubstr("[tensorboard] cannot create folder " + path("file") + "/job: Not a directory"));
  EXPECT_EQ(error_kind_of([&] { TensorBoardMonitor m(path("file"), "job"); }), ErrorKind::checkpoint);
  EXPECT_THAT(error_of([&] { TensorBoardMonitor m("", ""); }), HasSubstr("[tensorboard] the output folder is empty"));
}

using TensorBoardFullDiskTest = test_util::SmallDiskTest;

// A write that does not fit throws naming the file and leaves it whole records only.
TEST_F(TensorBoardFullDiskTest, AFullDiskIsAnErrorNamingTheFileAndTheFileStaysReadable) {
  TensorBoardMonitor m(mnt_, "job");
  fill();
  const std::vector<Event> batch(10, Event{"Train/Samples/train_loss", 1.0, 1});
  size_t written = 0;
  std::string msg;
  for (int i = 0; i < 1000 && msg.empty(); ++i) {
    try {
      m.write_events(batch);
      written += batch.size();
    } catch (const Error& e) {
      msg = e.what();
      EXPECT_EQ(e.kind(), ErrorKind::checkpoint);
    }
  }
  EXPECT_THAT(msg, HasSubstr("[tensorboard] appending to " + m.file() + " failed: No space left on device"));
  EXPECT_EQ(read_events(m.file()).size(), 1 + written);
}

}  // namespace
}  // namespace zt::monitor
