// Reading the loss curves from metrics.jsonl (Note [resumed runs]).
#include <gtest/gtest.h>

#include <sstream>

#include "common/temp_dir.h"
#include "loss_curves.h"
#include "zt/core/error.h"

namespace zt::apps {
namespace {

LossCurves parse(const std::string& text) {
  std::istringstream in(text);
  return parse_loss_curves(in);
}

std::vector<int64_t> steps(const std::vector<LossPoint>& c) {
  std::vector<int64_t> s;
  for (const LossPoint& p : c) s.push_back(p.step);
  return s;
}

TEST(LossCurves, TrainAndValidationRecordsMakeTwoCurves) {
  const LossCurves c = parse(R"({"event":"start","world_size":2,"config":{"steps_per_print":1}}
{"step":1,"epoch":0.1,"loss":2.5,"lr":0.001,"memory":{"param":10}}
{"step":2,"loss":2.25}
{"step":2,"val_loss":2.4}
{"step":3,"loss":2.0,"val_loss":2.3}
{"event":"final","summary":{"steps":3,"loss":9}}
)");
  EXPECT_EQ(steps(c.train), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(steps(c.val), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(c.train[1].loss, 2.25);
  EXPECT_EQ(c.val[1].loss, 2.3);
  EXPECT_EQ(c.runs, 1);
  EXPECT_EQ(c.skipped_lines, 0);
}

TEST(LossCurves, AResumedRunReplacesTheStepsItRepeats) {
  // The first run logged to step 40 (val at 20 and 40), saved a checkpoint at 30 and was killed;
  // the resumed run starts logging at 31: steps 31..40 of the first run are gone.
  std::string text = "{\"event\":\"start\"}\n";
  for (int s = 10; s <= 40; s += 10) text += "{\"step\":" + std::to_string(s) + ",\"loss\":1}\n";
  text += "{\"step\":20,\"val_loss\":1}\n{\"step\":40,\"val_loss\":1}\n{\"event\":\"start\"}\n";
  text += "{\"step\":31,\"loss\":2}\n{\"step\":41,\"loss\":2}\n";
  const LossCurves c = parse(text);
  EXPECT_EQ(steps(c.train), (std::vector<int64_t>{10, 20, 30, 31, 41}));
  EXPECT_EQ(steps(c.val), (std::vector<int64_t>{20}));
  EXPECT_EQ(c.train.back().loss, 2);
  EXPECT_EQ(c.runs, 2);
}

TEST(LossCurves, ANewRunInTheSameFolderReplacesTheOldOne) {
  const LossCurves c = parse(R"({"event":"start"}
{"step":1,"loss":5}
{"step":2,"loss":4}
{"event":"start"}
{"step":1,"loss":3}
)");
  ASSERT_EQ(steps(c.train), (std::vector<int64_t>{1}));
  EXPECT_EQ(c.train[0].loss, 3);
}

TEST(LossCurves, WithoutStartRecordsTheNewestRecordOfAStepWins) {
  const LossCurves c = parse("{\"step\":1,\"loss\":5}\n{\"step\":2,\"loss\":4}\n{\"step\":2,\"loss\":3.5}\n");
  EXPECT_EQ(steps(c.train), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(c.train[1].loss, 3.5);
  EXPECT_EQ(c.runs, 0);
}

TEST(LossCurves, TornAndForeignLinesAreSkippedAndCounted) {
  const LossCurves c = parse(
      "{\"step\":1,\"loss\":5}\n[1,2]\n\n  \nnot json\n{\"step\":\"2\",\"loss\":4}\n"
      "{\"step\":2.5,\"loss\":4}\n{\"step\":3,\"loss\":null}\n{\"step\":4,\"loss\":\"x\"}\n"
      "{\"event\":5,\"step\":6,\"loss\":1}\n{\"step\":7,\"lo");
  EXPECT_EQ(steps(c.train), (std::vector<int64_t>{1, 6}));  // an "event" that is no string starts nothing
  EXPECT_EQ(c.runs, 0);
  EXPECT_EQ(c.skipped_lines, 3);  // [1,2], not json, the torn last line
}

class LossCurvesFile : public testing_util::TempDirTest {};

TEST_F(LossCurvesFile, AMissingFileOrAFolderIsADataErrorNamingIt) {
  try {
    read_loss_curves(path("metrics.jsonl"));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::data);
    EXPECT_NE(std::string(e.what()).find("no metrics file " + path("metrics.jsonl")), std::string::npos) << e.what();
  }
  std::filesystem::create_directory(path("d"));
  try {
    read_loss_curves(path("d"));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is a directory"), std::string::npos) << e.what();
  }
  write("metrics.jsonl", "{\"step\":7,\"loss\":1.5}\n");
  EXPECT_EQ(steps(read_loss_curves(path("metrics.jsonl")).train), (std::vector<int64_t>{7}));
}

}  // namespace
}  // namespace zt::apps
