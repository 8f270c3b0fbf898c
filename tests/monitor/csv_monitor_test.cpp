// Note [csv_monitor files]: the files DeepSpeed's csv_monitor writes, byte for byte, and the
// folder both monitors write into.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "common/error_of.h"
#include "common/temp_dir.h"
#include "small_disk.h"
#include "zt/monitor/csv_monitor.h"

namespace zt::monitor {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using testing_util::error_kind_of;
using testing_util::error_of;

TEST(MonitorTest, TheFolderIsOsPathJoinOfOutputPathAndJobName) {
  EXPECT_EQ(log_dir_of("out", "job"), "out/job");
  EXPECT_EQ(log_dir_of("out/", "job"), "out/job");
  EXPECT_EQ(log_dir_of("", "DeepSpeedJobName"), "DeepSpeedJobName");  // DeepSpeed's defaults
  EXPECT_EQ(log_dir_of("out", "/abs/job"), "/abs/job");
  EXPECT_EQ(log_dir_of("out", ""), "out/");
}

// What CPython's repr(float) prints (checked against python3), the form csv.writer writes.
TEST(CsvFormatTest, ValuesArePrintedAsPythonsReprOfAFloat) {
  const std::vector<std::pair<double, const char*>> cases = {
      {0.1, "0.1"},
      {1.0, "1.0"},
      {1e-05, "1e-05"},
      {0.0001, "0.0001"},
      {1e16, "1e+16"},
      {1e15, "1000000000000000.0"},
      {123.456, "123.456"},
      {-0.0, "-0.0"},
      {std::numeric_limits<double>::quiet_NaN(), "nan"},
      {std::numeric_limits<double>::infinity(), "inf"},
      {-std::numeric_limits<double>::infinity(), "-inf"},
      {1.0 / 3, "0.3333333333333333"},
      {2.5e-310, "2.5e-310"},
      {1.7976931348623157e+308, "1.7976931348623157e+308"},
      {5e-324, "5e-324"},
      {-1.5e-7, "-1.5e-07"},
      {12345678.9, "12345678.9"},
      {0.1 + 0.2, "0.30000000000000004"},
      {4611686018427387904.0, "4.611686018427388e+18"},
      {65536, "65536.0"},
  };
  for (const auto& [v, want] : cases) EXPECT_EQ(python_float_repr(v), want);
}

TEST(CsvFormatTest, FieldsAreQuotedAsPythonsCsvWriterQuotesThem) {
  EXPECT_EQ(csv_field("train_loss"), "train_loss");
  EXPECT_EQ(csv_field("sp ace"), "sp ace");
  EXPECT_EQ(csv_field("a,b"), "\"a,b\"");
  EXPECT_EQ(csv_field("q\"x"), "\"q\"\"x\"");
  EXPECT_EQ(csv_field("line\nbreak"), "\"line\nbreak\"");
}

TEST(CsvFormatTest, FilesAndHeadersAreNamedAfterTheTag) {
  EXPECT_EQ(CsvMonitor::file_name_of("Train/Samples/train_loss"), "Train_Samples_train_loss.csv");
  EXPECT_EQ(CsvMonitor::header_of("Train/Samples/train_loss"), "train_loss");
  EXPECT_EQ(CsvMonitor::file_name_of("my tag/x y"), "my_tag_x_y.csv");
  EXPECT_EQ(CsvMonitor::header_of("my tag/x y"), "x y");
  EXPECT_EQ(CsvMonitor::file_name_of("loss"), "loss.csv");
  EXPECT_EQ(CsvMonitor::header_of("loss"), "loss");
}

class CsvMonitorTest : public testing_util::TempDirTest {
 protected:
  std::string read(const std::string& name) const {
    std::ifstream f(path(name), std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(f)), {});
  }
  // The rows of a CSV file as Python's csv module writes them (no quoted fields in the rows).
  std::vector<std::pair<std::string, std::string>> rows(const std::string& name) const {
    std::vector<std::pair<std::string, std::string>> out;
    std::istringstream in(read(name));
    for (std::string line; std::getline(in, line);) {
      EXPECT_TRUE(!line.empty() && line.back() == '\r') << line;
      line.pop_back();
      const size_t comma = line.find(',');
      out.emplace_back(line.substr(0, comma), line.substr(comma + 1));
    }
    return out;
  }
};

TEST_F(CsvMonitorTest, EachTagHasAFileWithAHeaderAndStepValueRowsAsDeepSpeedWritesThem) {
  CsvMonitor m(path("out"), "job");
  EXPECT_EQ(m.dir(), path("out") + "/job");
  EXPECT_TRUE(fs::is_directory(m.dir()));  // created at once, as DeepSpeed's setup_log_dir
  m.write_events({{"Train/Samples/train_loss", 2.5, 32}, {"Train/Samples/lr", 1e-05, 32}});
  m.write_scalar("Train/Samples/train_loss", 0.1, 64);
  m.write_scalar("my tag", 3, -1);
  m.flush();
  EXPECT_EQ(read("out/job/Train_Samples_train_loss.csv"), "step,train_loss\r\n32,2.5\r\n64,0.1\r\n");
  EXPECT_EQ(read("out/job/Train_Samples_lr.csv"), "step,lr\r\n32,1e-05\r\n");
  EXPECT_EQ(read("out/job/my_tag.csv"), "step,my tag\r\n-1,3.0\r\n");
}

TEST_F(CsvMonitorTest, EveryValueReadsBackExactly) {
  std::vector<Event> events;
  for (int i = 0; i < 200; ++i) events.push_back({"Train/Samples/train_loss", std::exp(-0.037 * i) * 7.25, 16 * i});
  {
    CsvMonitor m(path("out"), "job");
    m.write_events(events);
  }
  const auto got = rows("out/job/Train_Samples_train_loss.csv");
  ASSERT_EQ(got.size(), 1 + events.size());
  EXPECT_EQ(got[0], std::make_pair(std::string("step"), std::string("train_loss")));
  for (size_t i = 0; i < events.size(); ++i) {
    EXPECT_EQ(std::stoll(got[i + 1].first), events[i].step);
    EXPECT_EQ(std::strtod(got[i + 1].second.c_str(), nullptr), events[i].value) << got[i + 1].second;
  }
}

// DeepSpeed keys its files by name: tags that map to one file share it, under the first header.
TEST_F(CsvMonitorTest, TagsThatMapToOneFileShareItUnderTheFirstHeader) {
  CsvMonitor m(path("out"), "job");
  m.write_events({{"a/b", 1, 1}, {"a_b", 2, 2}, {"x/a,b", 3, 3}});
  EXPECT_EQ(read("out/job/a_b.csv"), "step,b\r\n1,1.0\r\n2,2.0\r\n");
  EXPECT_EQ(read("out/job/x_a,b.csv"), "step,\"a,b\"\r\n3,3.0\r\n");
}

// A resumed run appends to the same files; the header stays the first line only.
TEST_F(CsvMonitorTest, ASecondRunAppendsWithoutASecondHeader) {
  CsvMonitor(path("out"), "job").write_scalar("Train/Samples/lr", 0.5, 1);
  CsvMonitor(path("out"), "job").write_scalar("Train/Samples/lr", 0.25, 2);
  EXPECT_EQ(read("out/job/Train_Samples_lr.csv"), "step,lr\r\n1,0.5\r\n2,0.25\r\n");
}

TEST_F(CsvMonitorTest, AnUnwritableOutputPathIsOneErrorNamingTheFolder) {
  write("file", "not a folder");
  EXPECT_THAT(error_of([&] { CsvMonitor m(path("file"), "job"); }),
              HasSubstr("[csv_monitor] cannot create folder " + path("file") + "/job: Not a directory"));
  EXPECT_EQ(error_kind_of([&] { CsvMonitor m(path("file"), "job"); }), ErrorKind::checkpoint);
}

// Never written into anything but a regular file: a FIFO would block the run for ever.
TEST_F(CsvMonitorTest, ANonRegularFileInTheWayIsAnErrorNamingIt) {
  CsvMonitor m(path("out"), "job");
  ASSERT_EQ(::mkfifo(path("out/job/loss.csv").c_str(), 0644), 0);
  fs::create_directory(path("out/job/dir.csv"));
  EXPECT_THAT(error_of([&] { m.write_scalar("loss", 1, 1); }),
              HasSubstr("[csv_monitor] " + path("out/job/loss.csv") + " is a FIFO, not a regular file"));
  EXPECT_THAT(error_of([&] { m.write_scalar("dir", 1, 1); }), HasSubstr(path("out/job/dir.csv")));
  EXPECT_THAT(error_of([&] { m.write_scalar(std::string("a\0b", 3), 1, 1); }), HasSubstr("a tag holds a NUL byte"));
}

using CsvFullDiskTest = test_util::SmallDiskTest;

// A row that does not fit throws naming the file; the file keeps whole rows only.
TEST_F(CsvFullDiskTest, AFullDiskIsAnErrorNamingTheFileAndTheFileKeepsWholeRows) {
  CsvMonitor m(mnt_, "job");
  m.write_scalar("Train/Samples/train_loss", 1, 0);
  fill();
  const std::string file = mnt_ + "/job/Train_Samples_train_loss.csv";
  size_t written = 1;
  std::string msg;
  for (int i = 1; i < 10000 && msg.empty(); ++i) {
    try {
      m.write_scalar("Train/Samples/train_loss", 1.0 / 3, i);
      ++written;
    } catch (const Error& e) {
      msg = e.what();
    }
  }
  EXPECT_THAT(msg, HasSubstr("[csv_monitor] appending to " + file + " failed: No space left on device"));
  std::ifstream f(file, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(f)), {});
  ASSERT_GE(text.size(), 2u);
  EXPECT_EQ(text.substr(text.size() - 2), "\r\n");
  size_t lines = 0;
  for (size_t at = 0; (at = text.find("\r\n", at)) != std::string::npos; at += 2) ++lines;
  EXPECT_EQ(lines, 1 + written);
}

}  // namespace
}  // namespace zt::monitor
