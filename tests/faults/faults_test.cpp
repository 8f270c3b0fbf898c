// Faults under mpirun (issue 11): two runs on one run directory, a full disk, outputs that are
// not regular files, rank 0 stalled in the final save, a diverging loss, SIGTERM. Each ends
// with one clear line and a non-zero status (or the documented behaviour), never hangs, and
// leaves what an earlier run saved as it was, byte for byte, with no temporaries behind.
// ZT_FAULTS_BIN=/path/to/zerotrain runs the suite against another build (e.g. an older one).
#include "faults_util.h"

using namespace zt::faults;

namespace {

// Note [run directory]: the second run stops at the lock, naming the first; the first, paused
// meanwhile (SIGSTOP to its rank 0, whose pid the lock file names), then finishes intact.
TEST(Faults, ASecondRunOnTheSameDirectoryFailsNamingTheHolderAndTheFirstFinishesIntact) {
  if (!have_mnist()) GTEST_SKIP() << "MNIST not installed (scripts/setup.sh)";
  const std::string dir = tmpdir("concurrent");
  Background first(kMpi + kBin + " train" + kArgs + " run.max_steps=2000 run.dir=" + dir, dir + ".log");
  std::string pid;
  ASSERT_TRUE(wait_for([&] { return !(pid = holder_pid(dir)).empty(); })) << "the first run never locked " << dir;
  ASSERT_EQ(kill(std::stoi(pid), SIGSTOP), 0);
  Result second = run(kMpi + kBin + kTrain + " run.dir=" + dir);
  kill(std::stoi(pid), SIGCONT);
  EXPECT_EQ(second.code, 1) << second.out;
  const std::string line = one_failure_line(second);
  EXPECT_NE(line.find(dir + " is in use by another run (pid " + pid + " on host "), std::string::npos) << line;

  Result r = first.wait();
  ASSERT_EQ(r.code, 0) << r.out;
  const auto summary = nlohmann::json::parse(read_bytes(dir + "/summary.json"));
  EXPECT_EQ(summary["steps"], 2000);
  Result e = run(kBin + " eval" + kArgs + " run.dir=" + dir);
  ASSERT_EQ(e.code, 0) << e.out;
  char want[64];
  std::snprintf(want, sizeof want, "test accuracy: %.4f", summary["test_accuracy"].get<double>());
  EXPECT_NE(e.out.find(want), std::string::npos) << e.out << " vs " << want;
  EXPECT_EQ(count_finals(dir), 1);
}

// Note [run directory]: the weights cannot be written, so nothing is renamed and metrics.jsonl
// gets no "final" record; once there is space again the next run succeeds.
TEST_F(FullDisk, WeightsThatDoNotFitFailTheRunAndChangeNothingSaved) {
  const std::string dir = mnt_ + "/run";
  const Saved before = earlier_run(dir);
  fill_leaving(48 << 10);  // room for the metrics lines, not for 100 KB of weights
  Result r = run(kMpi + kBin + kTrain + " run.dir=" + dir);
  EXPECT_EQ(r.code, 1) << r.out;
  const std::string line = one_failure_line(r);
  EXPECT_NE(line.find("No space left on device"), std::string::npos) << line;
  EXPECT_NE(line.find(dir + "/model.safetensors"), std::string::npos) << line;
  expect_nothing_saved_changed(before);
  fs::remove(mnt_ + "/filler");
  Result again = run(kMpi + kBin + kTrain + " run.dir=" + dir);
  EXPECT_EQ(again.code, 0) << again.out;
  EXPECT_EQ(count_finals(dir), before.finals + 1);
}

// The disk fills after the weights (the torn case: new weights beside the old summary):
// the weights fit exactly, the summary does not. metrics.jsonl links to another filesystem, so
// its lines take none of the space that is measured out.
TEST_F(FullDisk, ASummaryThatDoesNotFitLeavesTheEarlierWeightsAndSummaryTogether) {
  const std::string dir = mnt_ + "/run", metrics = tmpdir("fulldisk_metrics") + "/metrics.jsonl";
  fs::create_directories(dir);
  fs::create_symlink(metrics, dir + "/metrics.jsonl");
  const Saved before = earlier_run(dir);
  fill_leaving((fs::file_size(dir + "/model.safetensors") + 4095) / 4096 * 4096);
  Result r = run(kMpi + kBin + kTrain + " run.dir=" + dir);
  EXPECT_EQ(r.code, 1) << r.out;
  const std::string line = one_failure_line(r);
  EXPECT_NE(line.find("No space left on device"), std::string::npos) << line;
  EXPECT_NE(line.find(dir + "/summary.json"), std::string::npos) << line;
  expect_nothing_saved_changed(before);
}

// Every write to metrics.jsonl is checked: a full disk ends the run naming the file.
TEST_F(FullDisk, AMetricsWriteThatFailsEndsTheRunNamingTheFile) {
  const std::string dir = mnt_ + "/run";
  fs::create_directories(dir);
  fill_leaving(0);
  Result r = run(kMpi + kBin + kTrain + " run.dir=" + dir);
  EXPECT_EQ(r.code, 1) << r.out;
  const std::string line = one_failure_line(r);
  EXPECT_NE(line.find("appending to " + dir + "/metrics.jsonl failed: No space left on device"), std::string::npos)
      << line;
  EXPECT_FALSE(fs::exists(dir + "/model.safetensors"));
}

// Outputs are regular files, checked before anything is opened: a FIFO would block rank 0 for
// ever, a directory or a device would take or refuse the bytes. Earlier outputs stay.
TEST(Faults, OutputsThatAreNotRegularFilesAreErrorsNamingThem) {
  if (!have_mnist()) GTEST_SKIP() << "MNIST not installed (scripts/setup.sh)";
  struct Case {
    std::string name, is;
    std::function<void(const std::string&)> make;
  };
  const std::vector<Case> cases = {
      {"model.safetensors", "is a FIFO", [](const std::string& p) { fs::remove(p), mkfifo(p.c_str(), 0644); }},
      {"summary.json", "is a directory", [](const std::string& p) { fs::remove(p), fs::create_directory(p); }},
      {"metrics.jsonl", "is a character device",
       [](const std::string& p) { fs::remove(p), fs::create_symlink("/dev/full", p); }},
  };
  for (const Case& c : cases) {
    const std::string dir = tmpdir("nonregular_" + c.name);
    const Saved before = earlier_run(dir);
    c.make(dir + "/" + c.name);
    Result r = run(kMpi + kBin + kTrain + " run.dir=" + dir, 60);
    EXPECT_EQ(r.code, 1) << c.name << ": " << r.out;
    const std::string line = one_failure_line(r);
    EXPECT_NE(line.find(dir + "/" + c.name + " " + c.is + ", not a regular file"), std::string::npos) << line;
    expect_nothing_saved_changed(before, c.name);
  }
}

// The fixed temporary name of old (Note [atomic files]) is not used: a FIFO there blocks nothing.
TEST(Faults, AFifoAtTheOldTemporaryNameDoesNotBlockTheSave) {
  if (!have_mnist()) GTEST_SKIP() << "MNIST not installed (scripts/setup.sh)";
  const std::string dir = tmpdir("fifo_tmp");
  earlier_run(dir);
  for (const char* name : {"model.safetensors.tmp", "summary.json.tmp"})
    ASSERT_EQ(mkfifo((dir + "/" + name).c_str(), 0644), 0);
  Result r = run(kMpi + kBin + kTrain + " run.dir=" + dir, 60);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(count_finals(dir), 2);
  struct stat st {};
  EXPECT_TRUE(stat((dir + "/model.safetensors.tmp").c_str(), &st) == 0 && S_ISFIFO(st.st_mode));  // not ours
}

// Note [agreed stops]: rank 0 stalls in the final save (a hung filesystem); rank 1 does not
// wait in MPI_Finalize for ever but times out in the vote that follows the writes.
TEST(Faults, RankZeroStalledInTheFinalSaveEndsTheJobWithinTheTimeout) {
  if (!have_mnist()) GTEST_SKIP() << "MNIST not installed (scripts/setup.sh)";
  const std::string dir = tmpdir("stall_save");
  const Saved before = earlier_run(dir);
  const auto t0 = std::chrono::steady_clock::now();
  Result r =
      run("env ZT_FAULT=stall:rank=0:step=21 " + kMpi + kBin + kTrain + " run.comm_timeout_s=3 run.dir=" + dir, 90);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_LT(r.code, 124) << "killed by the test's time limit: the job hung\n" << r.out;
  EXPECT_LT(secs, 60) << r.out;
  EXPECT_NE(r.out.find("fault injection: rank 0 stall at step 21"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("timed out after 3.0 s on rank 1 of 2"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("final save"), std::string::npos) << r.out;
  expect_nothing_saved_changed(before);
}

// fp32 and bf16: a non-finite loss stops every rank at that step with one line; fp16: the loss
// scaler decides (it skips such steps, and ends the run when the scale cannot go lower).
class DivergingLoss : public ::testing::TestWithParam<std::string> {};
std::string precision_name(const std::string& p);
TEST_P(DivergingLoss, StopsNamingTheStepAndKeepsWhatWasSaved) {
  if (!have_mnist()) GTEST_SKIP() << "MNIST not installed (scripts/setup.sh)";
  const std::string precision = GetParam();
  const std::string dir = tmpdir("nan_" + precision_name(precision));
  const Saved before = earlier_run(dir);
  Result r = run(kMpi + kBin + kTrain + " optimizer.params.lr=1e30 " + precision + " run.dir=" + dir);
  EXPECT_EQ(r.code, 1) << r.out;
  if (precision.rfind("fp16", 0) == 0) {  // the scaler's minimum, agreed by every rank: said once
    const std::string line = one_failure_line(r);
    EXPECT_NE(line.find("loss scale already at its minimum"), std::string::npos) << line;
  } else {
    const std::string line = one_failure_line(r);
    EXPECT_NE(line.find("the loss is not finite at step "), std::string::npos) << line;
    EXPECT_NE(line.find(dir + " are unchanged"), std::string::npos) << line;
  }
  expect_nothing_saved_changed(before);
}
std::string precision_name(const std::string& p) { return p.empty() ? "fp32" : p.substr(0, 4); }
INSTANTIATE_TEST_SUITE_P(Precisions, DivergingLoss, ::testing::Values("", "bf16.enabled=true", "fp16.enabled=true"),
                         [](const auto& info) { return precision_name(info.param); });

// Weights that the last step made infinite (after a finite loss) are not saved either.
TEST(Faults, InfiniteWeightsAfterTheLastStepAreNotSaved) {
  if (!have_mnist()) GTEST_SKIP() << "MNIST not installed (scripts/setup.sh)";
  const std::string dir = tmpdir("inf_weights");
  const Saved before = earlier_run(dir);
  // fp16 with a static loss scale: step 2's gradients are finite, its update overflows fp16.
  Result r = run(kMpi + kBin + " train" + kArgs +
                 " run.max_steps=2 fp16.enabled=true fp16.loss_scale=1 optimizer.params.lr=1e30"
                 " scheduler.params.warmup_min_ratio=1 run.dir=" +
                 dir);
  EXPECT_EQ(r.code, 1) << r.out;
  const std::string line = one_failure_line(r);
  EXPECT_NE(line.find("the weights after step 2 are not finite"), std::string::npos) << line;
  expect_nothing_saved_changed(before);
}

// SIGTERM to mpirun (as a scheduler sends it): Open MPI 4 sends SIGCONT to every rank, sleeps
// odls_base_sigkill_timeout (1 s), sends SIGTERM, sleeps again, sends SIGKILL. The ranks agree to
// stop at the next step, rank 0 says so once, nothing is saved. 3 s here for a loaded machine;
// and little output, since mpirun reads none while it sleeps: a rank printing more than a pipe
// holds (64 KiB) blocks in the write and never reaches the vote. Alone, the process exits 143.
TEST(Faults, SigtermSaysInterruptedOnceAndLeavesTheDirectoryConsistent) {
  if (!have_mnist()) GTEST_SKIP() << "MNIST not installed (scripts/setup.sh)";
  const std::string mpirun = std::string(ZT_MPIRUN) + " --mca odls_base_sigkill_timeout 3 -np 2 ";
  for (const std::string& launcher : {mpirun, std::string()}) {
    const std::string dir = tmpdir(launcher.empty() ? "sigterm_alone" : "sigterm_mpirun");
    const Saved before = earlier_run(dir);
    Background b(launcher + kBin + " train" + kArgs + " run.max_steps=100000000 steps_per_print=500 run.dir=" + dir,
                 dir + ".log");
    const auto metrics_lines = [&] {
      const std::string m = read_bytes(dir + "/metrics.jsonl");
      return std::count(m.begin(), m.end(), '\n');
    };
    const auto base = metrics_lines();
    ASSERT_TRUE(wait_for([&] { return metrics_lines() >= base + 2; })) << "training never started";
    kill(b.pid(), SIGTERM);
    Result r = b.wait();
    EXPECT_NE(r.code, 0) << r.out;
    if (launcher.empty()) {
      EXPECT_EQ(r.code, 143) << r.out;
    }
    const std::string line = one_failure_line(r);
    EXPECT_EQ(line.rfind("zerotrain: interrupted by SIGTERM at step ", 0), 0u) << line;
    EXPECT_NE(line.find(dir + " are unchanged"), std::string::npos) << line;
    expect_nothing_saved_changed(before);
  }
}

}  // namespace
