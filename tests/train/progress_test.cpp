// Note [progress line]: the line's fields in their order and the metrics' lines appended whole.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "zt/train/progress.h"
#include "zt/train/stops.h"

namespace zt::train {
namespace {

using ::testing::HasSubstr;

TEST(Progress, TheLineNamesEveryFieldInOrder) {
  ProgressLine p;
  p.step = 3;
  p.total_steps = 10;
  p.epoch = 0.3;
  p.loss = 1.23456;
  p.lr = 1e-3;
  p.grad_norm = 0.4567;
  p.rate = "96 samples/s";
  p.eta_s = 3725.4;
  p.memory = "param=1.0KiB";
  EXPECT_EQ(format(p),
            "step 3/10 | epoch 0.30 | loss 1.2346 | lr 1.00e-03 | grad-norm 0.457 | 96 samples/s | ETA 1:02:05 | "
            "param=1.0KiB");
  p.loss_scale = 65536;
  EXPECT_THAT(format(p), HasSubstr("grad-norm 0.457 | loss-scale 65536 | 96 samples/s"));
  EXPECT_EQ(fmt_eta(0.4), "0:00:00");
}

TEST(Progress, ThePaceCountsTheStepsSinceTheLastReport) {
  Pace pace(4, 20, 8);  // resumed at step 4 of 20, 8 samples a step
  const Pace::Report a = pace.report(6);
  EXPECT_EQ(a.from_step, 4);
  EXPECT_GT(a.samples_per_s, 0);
  EXPECT_GE(a.eta_s, 0);
  const Pace::Report b = pace.report(10);
  EXPECT_EQ(b.from_step, 6);
  EXPECT_GE(b.elapsed_s, a.elapsed_s);
}

TEST(Progress, MetricsLinesAreAppendedWholeAndABadPathIsNamed) {
  const std::string dir = ::testing::TempDir() + "/zt_progress_test";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string file = dir + "/metrics.jsonl";
  append_json_line(file, {{"step", 1}, {"loss", 2.5}});
  append_json_line(file, {{"step", 2}});
  std::ifstream in(file);
  std::string l1, l2, l3;
  std::getline(in, l1);
  std::getline(in, l2);
  EXPECT_EQ(nlohmann::json::parse(l1)["loss"], 2.5);
  EXPECT_EQ(nlohmann::json::parse(l2)["step"], 2);
  EXPECT_FALSE(std::getline(in, l3));
  ASSERT_EQ(::mkfifo((dir + "/fifo").c_str(), 0600), 0);
  try {
    append_json_line(dir + "/fifo", {{"step", 3}}, ErrorKind::checkpoint, "[example]");
    FAIL() << "a FIFO was appended to";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::checkpoint);
    EXPECT_THAT(e.what(), HasSubstr(dir + "/fifo"));
  }
}

// Note [agreed stops]: a vote's stop is the same error on every rank, with its exit status.
TEST(Stops, AVoteThatStopsIsOneAgreedError) {
  EXPECT_NO_THROW(stop_if_voted({}, "at step 1 of 2"));
  EXPECT_FALSE(Vote{}.stops());
  try {
    stop_if_voted({15, -1, false}, "at step 3 of 10", "; this run's last checkpoint is ck/step_00000002");
    FAIL();
  } catch (const AgreedStop& e) {
    EXPECT_EQ(e.exit_code(), 128 + 15);
    EXPECT_THAT(e.what(), HasSubstr("interrupted by SIGTERM at step 3 of 10, every rank stopped; this run's last"));
  }
  try {
    stop_if_voted({0, 1, false}, "at step 3 of 10");
    FAIL();
  } catch (const AgreedStop& e) {
    EXPECT_EQ(e.exit_code(), 1);
    EXPECT_THAT(e.what(), HasSubstr("the loss is not finite at step 3 of 10 on rank 1"));
  }
}

}  // namespace
}  // namespace zt::train
