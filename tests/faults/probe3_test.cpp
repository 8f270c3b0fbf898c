// The third hostile-input probe (issue 31): offload's swap files, the test hosts, paths and
// messages, used as a hostile or unlucky user would. Each case ends in one clear line and a
// non-zero status, or in the right result, and leaves what was there as it was.
#include <sys/stat.h>

#include "faults_util.h"

using namespace zt::faults;

namespace {

const std::string kOffload = "zero_optimization.offload_optimizer";

// One process training with its optimizer states in swap files under `nvme`.
Result offloaded(const std::string& nvme, const std::string& run_dir, const std::string& extra = "") {
  return run(kBin + kTrain + " '" + kOffload + "={\"device\": \"nvme\", \"nvme_path\": \"" + nvme + "\"}' run.dir=" +
             run_dir + extra);
}

// The run's swap folder under `nvme` (the only entry a run makes there).
std::string swap_folder(const std::string& nvme) {
  std::vector<fs::path> entries(fs::directory_iterator(nvme), {});
  EXPECT_EQ(entries.size(), 1u);
  return entries.empty() ? "" : entries.front().string();
}

class SwapPath : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have_mnist()) GTEST_SKIP() << "MNIST not installed (scripts/setup.sh)";
    dir_ = tmpdir(::testing::UnitTest::GetInstance()->current_test_info()->name());
    nvme_ = dir_ + "/nvme";
  }
  // Trains once, so the run's folders exist; returns the rank's folder.
  std::string first_run() {
    const Result r = offloaded(nvme_, dir_ + "/run");
    EXPECT_EQ(r.code, 0) << r.out;
    return swap_folder(nvme_) + "/rank0";
  }
  void expect_failure(const Result& r, const std::string& says) {
    EXPECT_EQ(r.code, 1) << r.out;
    EXPECT_NE(one_failure_line(r).find(says), std::string::npos) << "want: " << says << "\ngot: " << r.out;
  }
  std::string dir_, nvme_;
};

// Probe case 1: a link planted at a swap file's path is never followed, and its target keeps
// its bytes; the run's folders are private (0700).
TEST_F(SwapPath, ALinkAtASwapFilesPathIsRefusedAndItsTargetKeepsItsBytes) {
  const std::string rank = first_run();
  struct stat st{};
  ASSERT_EQ(stat(rank.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  const std::string target = dir_ + "/precious";
  std::ofstream(target) << "root's file";
  fs::create_symlink(target, rank + "/b0.swap");
  expect_failure(offloaded(nvme_, dir_ + "/run"), rank + "/b0.swap is a symbolic link");
  EXPECT_EQ(read_bytes(target), "root's file");
  EXPECT_TRUE(fs::is_symlink(rank + "/b0.swap"));
}

// Probe case 9: a FIFO at a swap file's path is named as such and left where it is.
TEST_F(SwapPath, AFifoAtASwapFilesPathIsNamedAndLeftAlone) {
  const std::string rank = first_run();
  ASSERT_EQ(mkfifo((rank + "/b0.swap").c_str(), 0600), 0);
  expect_failure(offloaded(nvme_, dir_ + "/run"), rank + "/b0.swap is a FIFO, not a swap file");
  EXPECT_TRUE(fs::is_fifo(rank + "/b0.swap"));
}

// A run folder that is a link, or another user's, is not used.
TEST_F(SwapPath, ARunFolderThatIsALinkOrAnotherUsersIsNotUsed) {
  const std::string rank = first_run(), run_folder = fs::path(rank).parent_path().string();
  fs::remove_all(run_folder);
  fs::create_directories(dir_ + "/elsewhere");
  fs::create_symlink(dir_ + "/elsewhere", run_folder);
  expect_failure(offloaded(nvme_, dir_ + "/run"), "the swap folder " + run_folder + " is a symbolic link");
  EXPECT_TRUE(fs::is_empty(dir_ + "/elsewhere"));
  if (geteuid() != 0) return;  // only root can make a folder another user's
  fs::remove(run_folder);
  fs::create_directories(run_folder);
  ASSERT_EQ(chown(run_folder.c_str(), 65534, 65534), 0);
  expect_failure(offloaded(nvme_, dir_ + "/run"), "the swap folder " + run_folder + " belongs to uid 65534");
}

// Probe case 4: two runs whose run.dir share a last name train at once on one nvme_path, each in
// a folder of its own; run.dir=.. keeps its folder below nvme_path.
TEST_F(SwapPath, RunsWhoseRunDirsShareALastNameNeverShareSwapFiles) {
  Background a(kBin + kTrain + " run.max_steps=60 '" + kOffload + "={\"device\": \"nvme\", \"nvme_path\": \"" + nvme_ +
                   "\"}' run.dir=" + dir_ + "/exp1/run",
               dir_ + "/a.log");
  const Result b = offloaded(nvme_, dir_ + "/exp2/run");
  const Result ra = a.wait();
  EXPECT_EQ(ra.code, 0) << ra.out;
  EXPECT_EQ(b.code, 0) << b.out;
  const std::vector<fs::path> folders(fs::directory_iterator(nvme_), {});
  ASSERT_EQ(folders.size(), 2u);
  for (const fs::path& f : folders) EXPECT_EQ(f.filename().string().rfind("run-", 0), 0u) << f;
  fs::create_directories(dir_ + "/deep/down");
  const Result up = offloaded(nvme_, dir_ + "/deep/down/..");
  EXPECT_EQ(up.code, 0) << up.out;
  int deep = 0, all = 0;
  for (const fs::path& f : fs::directory_iterator(nvme_)) ++all, deep += f.filename().string().rfind("deep-", 0) == 0;
  EXPECT_EQ(all, 3);
  EXPECT_EQ(deep, 1) << "run.dir=<dir>/deep/down/.. is the run folder 'deep', below nvme_path";
}

// Probe case 3: a huge zero_hpz_partition_size is one line at once (it hung, stepping down one
// at a time), and `estimate` refuses what `train` refuses (probe case 5).
TEST(Probe3, AHugeHpzPartitionIsOneLineNamingTheNearestValidSize) {
  const std::string hpz = " zero_optimization.stage=3 zero_optimization.zero_hpz_partition_size=";
  for (const std::string& size : {std::string("1e15"), std::string("1099511627776")}) {
    const Result r = run(kBin + kTrain + hpz + size + " run.dir=" + tmpdir("hpz_huge"), 20);
    EXPECT_EQ(r.code, 1) << r.out;
    EXPECT_NE(one_failure_line(r).find("must divide the world size 1 (nearest valid: 1)"), std::string::npos) << r.out;
  }
  const Result e = run(kBin + " estimate" + kArgs + hpz + "3 --world 4", 20);
  EXPECT_EQ(e.code, 1) << e.out;
  EXPECT_NE(one_failure_line(e).find("zero_hpz_partition_size = 3 must divide the world size 4 (nearest valid: 2 or 4)"),
            std::string::npos)
      << e.out;
}

// Probe case 11: with dynamic loss scaling already on, the advice is what to lower, with its value.
TEST(Probe3, AnFp16RunThatStillOverflowsWithADynamicScaleSaysWhatToLower) {
  const Result r = run(kBin + kTrain +
                           " fp16.enabled=true fp16.initial_scale_power=60"
                           " run.max_consecutive_skipped_steps=3 run.dir=" +
                           tmpdir("fp16_dynamic"),
                       60);
  EXPECT_EQ(r.code, 1) << r.out;
  const std::string line = one_failure_line(r);
  EXPECT_NE(line.find("the scale is dynamic already: lower fp16.initial_scale_power (60) or fp16.min_loss_scale"),
            std::string::npos)
      << r.out;
  EXPECT_EQ(line.find("use dynamic loss scaling"), std::string::npos) << r.out;
}

// Probe case 13: a FIFO or a device node named `latest` in checkpoint.dir is named and left as it
// is, by a run's save and by import --force, before anything is written.
TEST(Probe3, ALatestThatIsNotARegularFileIsNamedAndLeftAlone) {
  if (!have_mnist()) GTEST_SKIP() << "MNIST not installed (scripts/setup.sh)";
  const std::string dir = tmpdir("latest_fifo"), ckpt = dir + "/ckpt", latest = ckpt + "/latest";
  const Result first = run(kBin + kTrain + " checkpoint.every_steps=10 checkpoint.dir=" + ckpt + " run.dir=" + dir);
  ASSERT_EQ(first.code, 0) << first.out;
  fs::remove(latest);
  ASSERT_EQ(mkfifo(latest.c_str(), 0644), 0);
  const Result save = run(kBin + kTrain + " checkpoint.every_steps=10 checkpoint.dir=" + ckpt + " run.dir=" + dir + "/2");
  EXPECT_EQ(save.code, 1) << save.out;
  EXPECT_NE(one_failure_line(save).find(latest + " is a FIFO, not the file that names the newest checkpoint"),
            std::string::npos)
      << save.out;
  const Result imported =
      run(kBin + " import " + dir + "/model.safetensors" + kArgs + " --out " + ckpt + " --force", 60);
  EXPECT_EQ(imported.code, 1) << imported.out;
  EXPECT_NE(imported.out.find(latest + " is a FIFO"), std::string::npos) << imported.out;
  EXPECT_TRUE(fs::is_fifo(latest));
  for (const auto& e : fs::directory_iterator(ckpt))
    EXPECT_EQ(e.path().filename().string().find(".partial"), std::string::npos) << "left behind: " << e.path();
}

// Probe case 14: ZT_COMM_NODE_RANKS is a whole positive number ("2abc" was read as 2). (Nodes it
// cannot make evenly give a flat mpi group under `auto`, as uneven real nodes do, and the start
// line names the backend: CommHier.UnevenNodesAreRefusedByShmAndServedByMpiUnderAuto.)
TEST(Probe3, ZtCommNodeRanksIsAWholePositiveNumber) {
  if (!have_mnist()) GTEST_SKIP() << "MNIST not installed (scripts/setup.sh)";
  const std::string np3 = std::string(ZT_MPIRUN) + " -np 3 -x ZT_COMM_NODE_RANKS ";
  for (const std::string& bad : {std::string("2abc"), std::string("99999999999999999999"), std::string("0")}) {
    const Result r = run("env ZT_COMM_NODE_RANKS=" + bad + " " + np3 + kBin + kTrain + " run.dir=" + tmpdir("nr"), 60);
    EXPECT_NE(r.code, 0) << r.out;
    EXPECT_NE(r.out.find("ZT_COMM_NODE_RANKS must be a positive number of ranks, got '" + bad + "'"), std::string::npos)
        << r.out;
  }
}

// Probe case 2: a budget the plan accepts never fails on the budget later, the final evaluation
// included, where 16-bit products take the f32 path (the weights' f32 copies are planned); around
// the plan's peak a budget either refuses before step 1 or trains to the end (monotonic); and the
// start line says what the budget covers.
TEST(Probe3, ABudgetThePlanAcceptsHoldsToTheEndOnTheF32ProductPath) {
  if (!have_mnist()) GTEST_SKIP() << "MNIST not installed (scripts/setup.sh)";
  const std::string dir = tmpdir("budget_bf16");
  const std::string args = " train --config configs/mnist_mlp.json model.hidden=[1024,1024] zero_optimization.stage=1"
                           " data.train_limit=2048 data.test_limit=1000 run.max_steps=3 bf16.enabled=true"
                           " run.bf16_products=f32 '" + kOffload + "={\"device\": \"auto\", \"nvme_path\": \"" +
                           dir + "/nvme\"}'";
  auto train = [&](int64_t mb) {
    return run(kBin + args + " run.memory_budget_mb=" + std::to_string(mb) + " run.dir=" + dir + "/b" +
                   std::to_string(mb),
               120);
  };
  const Result roomy = train(4096);
  ASSERT_EQ(roomy.code, 0) << roomy.out;
  EXPECT_NE(roomy.out.find("holds zerotrain's allocations (model states, buffers, activations, the data); the process "
                           "adds its baseline of "),
            std::string::npos)
      << roomy.out;
  std::ifstream f(dir + "/b4096/metrics.jsonl");
  std::string first;
  std::getline(f, first);
  const nlohmann::json start = nlohmann::json::parse(first), plan = start["memory_plan"];
  EXPECT_EQ(start["products"]["f32_compute"], true) << start["products"].dump();  // Note [f32 compute]
  const int64_t peak_mb = (plan["in_use"].get<int64_t>() >> 20) + 1;
  bool accepted = false;
  for (int64_t mb = peak_mb - 6; mb <= peak_mb + 6; mb += 3) {
    const Result r = train(mb);
    if (r.code == 0) {
      accepted = true;
      EXPECT_NE(r.out.find("test accuracy"), std::string::npos) << mb << " MiB: " << r.out;
      continue;
    }
    EXPECT_FALSE(accepted) << mb << " MiB failed after a smaller budget trained: " << r.out;
    EXPECT_NE(one_failure_line(r).find("[budget] run.memory_budget_mb = " + std::to_string(mb)), std::string::npos)
        << mb << " MiB: " << r.out;
    EXPECT_EQ(r.out.find("step 1/"), std::string::npos) << "refused after training began: " << r.out;
  }
  EXPECT_TRUE(accepted);
}

// Probe case 5: `estimate` plans with the data `train` loads, so for budgets on both sides of the
// run's peak the two choose the same (or both refuse, naming the same smallest peak).
TEST(Probe3, EstimatesBudgetPlanIsTheOneTrainMakes) {
  if (!have_mnist()) GTEST_SKIP() << "MNIST not installed (scripts/setup.sh)";
  const std::string dir = tmpdir("estimate_budget");
  const std::string args = " --config configs/mnist_mlp.json model.hidden=[1024,1024] data.train_limit=4096"
                           " data.test_limit=1000 '" + kOffload + "={\"device\": \"auto\", \"nvme_path\": \"" + dir +
                           "/nvme\"}'";
  const Result roomy = run(kBin + " train" + args + " run.max_steps=1 run.memory_budget_mb=4096 run.dir=" + dir + "/r", 60);
  ASSERT_EQ(roomy.code, 0) << roomy.out;
  std::ifstream f(dir + "/r/metrics.jsonl");
  std::string first;
  std::getline(f, first);
  const int64_t peak_mb = (nlohmann::json::parse(first)["memory_plan"]["in_use"].get<int64_t>() >> 20) + 1;
  for (int64_t mb : {peak_mb - 2, peak_mb + 2}) {
    const std::string budget = " run.memory_budget_mb=" + std::to_string(mb);
    const Result e = run(kBin + " estimate" + args + budget + " --world 1 --json", 60);
    ASSERT_EQ(e.code, 0) << e.out;
    const nlohmann::json plan = nlohmann::json::parse(e.out)["budget_plan"];
    EXPECT_GT(plan["data"].get<int64_t>(), 0) << e.out;
    const Result t = run(kBin + " train" + args + budget + " run.max_steps=1 run.dir=" + dir + "/t" + std::to_string(mb), 60);
    if (plan.contains("error")) {
      EXPECT_EQ(t.code, 1) << mb << " MiB: estimate refuses, train does not: " << t.out;
      const std::string said = plan["error"].get<std::string>();
      EXPECT_NE(t.out.find(said.substr(0, said.find(" ("))), std::string::npos) << said << "\n" << t.out;
    } else {
      EXPECT_EQ(t.code, 0) << mb << " MiB: estimate accepts, train does not: " << t.out;
      EXPECT_NE(t.out.find("zerotrain: " + plan["choices"][0].get<std::string>()), std::string::npos)
          << plan.dump() << "\n" << t.out;
    }
  }
}

}  // namespace
