// The second hostile-input probe (issue 21): checkpoints, `ckpt`, `export`, `import`,
// `generate` and the data and checkpoint folders, used as a hostile user would. Every case ends
// with one clear line and a non-zero status, never hangs, and leaves what was saved as it was.
// Tools run as one process; the cases that train run under mpirun with 2 ranks.
#include <sys/sysmacros.h>

#include "faults_util.h"
#include "zt/ckpt/metadata.h"

using namespace zt::faults;
using nlohmann::json;

namespace {

// A usage error is said by CLI11's path: "zerotrain: ... (see zerotrain X --help)", exit 2.
void expect_usage_error(const Result& r, const std::string& says) {
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
  EXPECT_NE(r.out.find(says), std::string::npos) << r.out;
}

// One process, or `np` ranks under mpirun.
std::string launch(int np) { return np == 1 ? "" : std::string(ZT_MPIRUN) + " -np " + std::to_string(np) + " "; }

// Exit 1 and exactly one failure line, which says `says`.
void expect_failure(const Result& r, const std::string& says) {
  EXPECT_EQ(r.code, 1) << r.out;
  const std::string line = one_failure_line(r);
  EXPECT_NE(line.find(says), std::string::npos) << "want: " << says << "\ngot: " << r.out;
}

// A 20-step run at N = 2 with checkpoints at steps 10 and 20, once per test (ctest runs each
// test in its own process).
class HostileCkpt : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have_mnist()) GTEST_SKIP() << "MNIST not installed (scripts/setup.sh)";
    dir_ = tmpdir(::testing::UnitTest::GetInstance()->current_test_info()->name());
    ckpt_ = dir_ + "/checkpoints";
    const Result r = run(kMpi + kBin + kTrain + " checkpoint.every_steps=10 run.dir=" + dir_);
    ASSERT_EQ(r.code, 0) << r.out;
    step20_ = ckpt_ + "/step_00000020";
  }
  // metadata.json of `folder` changed by `edit`, then sealed again (its checksum recomputed), as
  // someone who knows the format would: the field checks alone must catch it.
  static void reseal(const std::string& folder, const std::function<void(json&)>& edit) {
    json m = json::parse(read_bytes(folder + "/metadata.json"));
    edit(m);
    m["metadata_xxh64"] = zt::ckpt::metadata_checksum(m);
    std::ofstream(folder + "/metadata.json") << m.dump(1);
  }
  Result resume(int np) const {
    return run(launch(np) + kBin + kTrain + " run.max_steps=30 run.resume=latest run.comm_timeout_s=3 run.dir=" + dir_ +
               "/resumed" + std::to_string(np) + " checkpoint.dir=" + ckpt_);
  }
  Result tool(const std::string& args) const { return run(kBin + " " + args, 30); }
  std::string dir_, ckpt_, step20_;
};

// Case 1: --out that is a FIFO, a device node or a folder is refused and left as it was; a
// symlink is followed (its target is written, the link kept), as cp does.
TEST_F(HostileCkpt, ExportRefusesOutputsThatAreNotRegularFilesAndKeepsSymlinks) {
  const std::string fifo = dir_ + "/fifo", dev = dir_ + "/null", folder = dir_ + "/folder";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0644), 0);
  const bool have_dev = mknod(dev.c_str(), S_IFCHR | 0666, makedev(1, 3)) == 0;  // /dev/null's numbers
  fs::create_directories(folder);
  expect_failure(tool("export " + ckpt_ + " --out " + fifo), fifo + " is a FIFO, not a regular file");
  EXPECT_TRUE(fs::is_fifo(fifo));
  if (have_dev) {
    expect_failure(tool("export " + ckpt_ + " --out " + dev), dev + " is a character device, not a regular file");
    EXPECT_TRUE(fs::is_character_file(dev));
  }
  expect_failure(tool("export " + ckpt_ + " --out " + folder), folder + " is a directory, not a regular file");
  const std::string target = dir_ + "/weights.safetensors", link = dir_ + "/link.safetensors";
  std::ofstream(target) << "old";
  fs::create_symlink(target, link);
  expect_failure(tool("export " + ckpt_ + " --out " + link), link + " already exists: pass --force to replace it");
  EXPECT_EQ(read_bytes(target), "old");
  const Result ok = tool("export " + ckpt_ + " --out " + link + " --force");
  EXPECT_EQ(ok.code, 0) << ok.out;
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_GT(fs::file_size(target), 1000u);
  for (const auto& e : fs::directory_iterator(dir_))
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << "left behind: " << e.path();
}

// Case 2: an edit that keeps metadata.json consistent (a counter) fails verify, inspect, export
// and resume on its checksum.
TEST_F(HostileCkpt, AConsistentEditOfTheMetadataFailsItsChecksumEverywhere) {
  json m = json::parse(read_bytes(step20_ + "/metadata.json"));
  m["counters"]["optimizer_steps"] = 3;
  std::ofstream(step20_ + "/metadata.json") << m.dump(1);
  const std::string says = "'metadata_xxh64' does not match the file's contents";
  const Result v = tool("ckpt verify " + ckpt_);
  EXPECT_EQ(v.code, 1) << v.out;
  EXPECT_NE(v.out.find("FAILED  " + step20_ + ": [ckpt] " + step20_ + "/metadata.json: " + says), std::string::npos)
      << v.out;
  expect_failure(tool("ckpt inspect " + ckpt_), says);
  expect_failure(tool("export " + ckpt_ + " --out " + dir_ + "/w.safetensors"), says);
  for (int np : {1, 2}) expect_failure(resume(np), says);
}

// Cases 3-5: with the checksum recomputed, each field is still checked, in one reader, before use.
TEST_F(HostileCkpt, ResealedMetadataIsCheckedFieldByFieldBeforeUse) {
  const std::vector<std::pair<std::function<void(json&)>, std::string>> cases = {
      {[](json& m) { m.erase("extra"); }, "'extra' is missing"},
      {[](json& m) { m["extra"]["step"] = -20; }, "'extra.step' is -20, outside [0, "},
      {[](json& m) { m["extra"]["step"] = 10.5; }, "'extra.step' must be an integer"},
      {[](json& m) { m["extra"]["step"] = json::parse("1e300"); }, "'extra.step' must be an integer"},
      {[](json& m) { m["extra"]["step"] = 12; }, "'extra.step' differs from 'step' 20"},
  };
  for (const auto& [edit, says] : cases) {
    const std::string saved = read_bytes(step20_ + "/metadata.json");
    reseal(step20_, edit);
    for (int np : {1, 2}) expect_failure(resume(np), step20_ + "/metadata.json: " + says);
    std::ofstream(step20_ + "/metadata.json") << saved;
  }
  reseal(step20_, [](json& m) { m["tag"] = 7; });
  for (const std::string& cmd :
       {"ckpt inspect " + ckpt_, "export " + ckpt_ + " --out " + dir_ + "/w.safetensors", "ckpt verify " + step20_})
    expect_failure(tool(cmd), "'tag' must be a string");
}

// Cases 6 and 14: `latest` holding a NUL, a folder or a FIFO named `latest`: each is said in one
// whole line by resume (under mpirun) and by every ckpt tool, and nothing blocks on the FIFO.
TEST_F(HostileCkpt, ALatestThatIsNotAPlainTagIsRefusedWithoutBlocking) {
  const std::string latest = ckpt_ + "/latest";
  const std::vector<std::pair<std::function<void()>, std::string>> cases = {
      {[&] { std::ofstream(latest) << std::string("step_0000") + '\0' + "020\n"; },
       latest + " names 'step_0000\\x00020', which is not a checkpoint tag"},
      {[&] {
         fs::remove(latest);
         fs::create_directory(latest);
       },
       latest + " is a directory, not a regular file"},
      {[&] {
         fs::remove_all(latest);
         ASSERT_EQ(mkfifo(latest.c_str(), 0644), 0);
       },
       latest + " is a FIFO, not a regular file"},
  };
  for (const auto& [make, says] : cases) {
    make();
    for (int np : {1, 2}) expect_failure(resume(np), says);
    for (const std::string& cmd :
         {"ckpt inspect " + ckpt_, "ckpt verify " + ckpt_, "export " + ckpt_ + " --out " + dir_ + "/w.safetensors"})
      expect_failure(tool(cmd), says);
    const Result ls = tool("ckpt ls " + ckpt_);  // lists the tags; none is marked latest
    EXPECT_EQ(ls.code, 0) << ls.out;
    EXPECT_NE(ls.out.find("step_00000020"), std::string::npos) << ls.out;
  }
}

// Cases 7 and 8: import replaces nothing without --force (a tag, or `latest` of a folder that has
// checkpoints), and a tag that is not a plain name is refused before anything is built.
TEST_F(HostileCkpt, ImportReplacesNothingWithoutForceAndTakesOnlyPlainTags) {
  const std::string weights = dir_ + "/model.safetensors", cfg = kArgs;
  const std::string meta20 = read_bytes(step20_ + "/metadata.json");
  for (int np : {1, 2}) {
    expect_failure(run(launch(np) + kBin + " import " + weights + cfg + " --out " + ckpt_ + " --tag step_00000020"),
                   ckpt_ + "/step_00000020 already exists: pass --force to replace it");
    expect_failure(run(launch(np) + kBin + " import " + weights + cfg + " --out " + ckpt_),
                   "importing would move `latest` back to step 0: pass --force");
  }
  EXPECT_EQ(read_bytes(step20_ + "/metadata.json"), meta20);
  EXPECT_EQ(read_bytes(ckpt_ + "/latest"), "step_00000020\n");
  expect_failure(run(kBin + " import " + weights + cfg + " --out " + dir_ + "/fresh --tag \"$(printf 'a\\nb')\""),
                 "[import] --tag 'a\\x0ab' is not a checkpoint tag");
  EXPECT_FALSE(fs::exists(dir_ + "/fresh/latest"));
  const Result forced = run(kMpi + kBin + " import " + weights + cfg + " --out " + ckpt_ + " --force");
  EXPECT_EQ(forced.code, 0) << forced.out;
  EXPECT_EQ(read_bytes(ckpt_ + "/latest"), "step_00000000\n");
  const Result fresh = run(kBin + " import " + weights + cfg + " --out " + dir_ + "/fresh");
  EXPECT_EQ(fresh.code, 0) << fresh.out;
}

// Issue 31, probe case 7: import --force into a checkpoint.dir a running job holds is refused,
// naming the holder, at 1 and 2 ranks; `latest` stays the job's.
TEST_F(HostileCkpt, ImportForceRespectsTheLockOfARunningJob) {
  const std::string weights = dir_ + "/model.safetensors", job = dir_ + "/job";
  Background first(kBin + " train" + kArgs + " run.max_steps=400 checkpoint.every_steps=100 checkpoint.dir=" + ckpt_ +
                       " run.resume=latest run.dir=" + job,
                   dir_ + "/job.log");
  ASSERT_TRUE(wait_for([&] { return holder_pid(ckpt_) == std::to_string(first.pid()); })) << "the job never locked";
  ASSERT_EQ(kill(first.pid(), SIGSTOP), 0);
  for (int np : {1, 2})
    expect_failure(run(launch(np) + kBin + " import " + weights + kArgs + " --out " + ckpt_ + " --force"),
                   "[import] --out " + ckpt_ + " is in use by another run (pid " + std::to_string(first.pid()));
  EXPECT_EQ(read_bytes(ckpt_ + "/latest"), "step_00000020\n");
  kill(first.pid(), SIGCONT);
  const Result r = first.wait();
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(read_bytes(ckpt_ + "/latest"), "step_00000400\n");
}

// Runs of one process and of 2 ranks under mpirun.
class HostileRun : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    if (!have_mnist()) GTEST_SKIP() << "MNIST not installed (scripts/setup.sh)";
  }
  std::string train() const { return launch(GetParam()) + kBin + kTrain; }
  std::string name(const std::string& base) const { return base + "_np" + std::to_string(GetParam()); }
};

// Case 12: a checkpoint.dir that cannot be created ends the run before step 1.
TEST_P(HostileRun, ACheckpointDirThatCannotBeCreatedFailsBeforeStepOne) {
  const std::string dir = tmpdir(name("ckpt_uncreatable")), file = dir + "/a_file";
  std::ofstream(file) << "x";
  const Result r = run(train() + " checkpoint.every_steps=10 checkpoint.dir=" + file + "/ckpt run.dir=" + dir + "/run");
  expect_failure(r, "[ckpt] cannot create checkpoint.dir " + file + "/ckpt: Not a directory");
  EXPECT_EQ(r.out.find("step 10/20"), std::string::npos) << "it trained before failing:\n" << r.out;
}

// Case 13: two runs with their own run.dir and one checkpoint.dir: the second stops at once,
// naming the first, whose checkpoints are then complete and its own.
TEST_P(HostileRun, ASecondRunOnTheSameCheckpointDirFailsNamingTheHolder) {
  const std::string dir = tmpdir(name("shared_ckpt")), ckpt = dir + "/ckpt";
  Background first(launch(GetParam()) + kBin + " train" + kArgs +
                       " run.max_steps=400 checkpoint.every_steps=100 checkpoint.dir=" + ckpt + " run.dir=" + dir +
                       "/first",
                   dir + "/first.log");
  std::string pid;
  ASSERT_TRUE(wait_for([&] { return !(pid = holder_pid(ckpt)).empty(); })) << "the first run never locked " << ckpt;
  ASSERT_EQ(kill(std::stoi(pid), SIGSTOP), 0);
  const Result second =
      run(train() + " checkpoint.every_steps=10 checkpoint.dir=" + ckpt + " run.dir=" + dir + "/second");
  kill(std::stoi(pid), SIGCONT);
  expect_failure(second, "[ckpt] checkpoint.dir " + ckpt + " is in use by another run (pid " + pid + " on host ");
  EXPECT_FALSE(fs::exists(dir + "/second/model.safetensors"));
  const Result r = first.wait();
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(read_bytes(ckpt + "/latest"), "step_00000400\n");
  EXPECT_EQ(run(kBin + " ckpt verify " + ckpt).code, 0);
}

// Case 9 (and 15's loss-scale line): a static fp16 loss scale that overflows at every step stops
// the run after run.max_consecutive_skipped_steps, saving nothing as trained; the progress line
// prints the scale, 1e+19, not a wrapped integer.
TEST_P(HostileRun, AnFp16RunThatSkipsEveryStepStopsAndSavesNothing) {
  const std::string dir = tmpdir(name("fp16_skips"));
  const Saved before = earlier_run(dir);
  const Result r = run(train() +
                       " fp16.enabled=true fp16.loss_scale=1e19 run.max_consecutive_skipped_steps=5 steps_per_print=1"
                       " run.dir=" +
                       dir);
  expect_failure(r, "[train] 5 optimizer steps in a row were skipped for fp16 gradient overflow (steps 1 to 5");
  EXPECT_NE(r.out.find("loss-scale 1e+19"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("loss-scale -9223372036854775808"), std::string::npos) << r.out;
  expect_nothing_saved_changed(before);
  // Shorter than the limit: every step skipped is still no training, and nothing is saved.
  const Result all = run(train() + " fp16.enabled=true fp16.loss_scale=1e19 run.max_steps=3 run.dir=" + dir);
  expect_failure(all, "[train] all 3 optimizer steps of this run were skipped for fp16 gradient overflow");
  expect_nothing_saved_changed(before);
}

// Issue 18: offload_optimizer.device = nvme with an nvme_path that cannot hold folders fails
// before step 1, in one line naming the folder, and changes nothing saved.
TEST_P(HostileRun, AnNvmePathThatCannotBeWrittenFailsBeforeStepOneInOneLine) {
  const std::string dir = tmpdir(name("nvme_unwritable")), file = dir + "/a_file";
  std::ofstream(file) << "x";
  const Saved before = earlier_run(dir + "/run");
  const Result r = run(train() + " 'zero_optimization.offload_optimizer={\"device\": \"nvme\", \"nvme_path\": \"" +
                       file + "\"}' run.dir=" + dir + "/run");
  expect_failure(r, "[offload] cannot create the swap folder " + file + ": Not a directory");
  EXPECT_EQ(r.out.find("step 10/20"), std::string::npos) << r.out;
  expect_nothing_saved_changed(before);
}

// A DeepSpeed ZeRO-3 + optimizer-offload configuration runs unchanged, its start line saying
// where the states are, and trains to the weights of the same run in memory, bit for bit.
TEST_P(HostileRun, ADeepSpeedStage3OffloadConfigRunsUnchangedAndMatchesTheInMemoryRun) {
  const std::string dir = tmpdir(name("ds_offload")), cfg = dir + "/ds.json";
  std::ofstream(cfg) << R"({
  "train_batch_size": 64, "gradient_accumulation_steps": 1, "gradient_clipping": 1.0, "steps_per_print": 10,
  "optimizer": {"type": "AdamW", "params": {"lr": 1e-3, "betas": [0.9, 0.999], "eps": 1e-8, "weight_decay": 0.01}},
  "zero_optimization": {"stage": 3, "overlap_comm": true, "contiguous_gradients": true, "sub_group_size": 1e4,
    "reduce_bucket_size": 5e5, "stage3_prefetch_bucket_size": 5e5, "stage3_param_persistence_threshold": 1e4,
    "stage3_max_live_parameters": 1e9, "stage3_max_reuse_distance": 1e9,
    "stage3_gather_16bit_weights_on_model_save": true,
    "offload_optimizer": {"device": "nvme", "nvme_path": ")" +
                            dir + R"(/nvme", "pin_memory": true,
                          "buffer_count": 4, "fast_init": false},
    "offload_param": {"device": "cpu", "pin_memory": true}},
  "aio": {"block_size": 1048576, "queue_depth": 8, "thread_count": 1, "single_submit": false, "overlap_events": true},
  "model": {"type": "mlp", "hidden": [64]}, "data": {"dataset": "mnist", "train_limit": 3200, "test_limit": 1000},
  "run": {"max_steps": 20}
})";
  const std::string mem = cfg + " 'zero_optimization.offload_optimizer={\"device\": \"none\"}'";
  const Result a = run(launch(GetParam()) + kBin + " train --config " + cfg + " run.dir=" + dir + "/nvme");
  ASSERT_EQ(a.code, 0) << a.out;
  EXPECT_NE(a.out.find("offload_optimizer: nvme, fp32 master and optimizer states in swap files under " + dir +
                       "/nvme/nvme-"),  // Note [swap path]: the run folder's name and its path's hash
            std::string::npos)
      << a.out;
  EXPECT_NE(a.out.find("offload_param: cpu, where a CPU run's parameters already are"), std::string::npos) << a.out;
  const Result b = run(launch(GetParam()) + kBin + " train --config " + mem + " run.dir=" + dir + "/mem");
  ASSERT_EQ(b.code, 0) << b.out;
  EXPECT_EQ(read_bytes(dir + "/nvme/model.safetensors"), read_bytes(dir + "/mem/model.safetensors"));
  // ZeRO-Infinity: the parameters to nvme as well (Note [parameter swap]).
  const Result c = run(launch(GetParam()) + kBin + " train --config " + cfg +
                       " 'zero_optimization.offload_param={\"device\": \"nvme\", \"nvme_path\": \"" + dir +
                       "/nvme\"}' run.dir=" + dir + "/infinity");
  ASSERT_EQ(c.code, 0) << c.out;
  EXPECT_NE(c.out.find("offload_param: nvme, the parameter shards of 1 of 2 units in swap files under " + dir +
                       "/nvme/infinity-"),
            std::string::npos)
      << c.out;
  EXPECT_EQ(read_bytes(dir + "/infinity/model.safetensors"), read_bytes(dir + "/mem/model.safetensors"));
}

INSTANTIATE_TEST_SUITE_P(Ranks, HostileRun, ::testing::Values(1, 2));

// Swap files take their whole size when they are made (posix_fallocate), so a disk too small
// fails before step 1 saying how much was needed, and a disk that fills later cannot fail a
// step. tmpfs has no O_DIRECT: this also runs the page-cache path.
TEST_F(FullDisk, SwapFilesThatDoNotFitFailBeforeStepOneSayingTheBytes) {
  const std::string dir = tmpdir("nvme_full");
  const Saved before = earlier_run(dir);
  const Result r = run(kMpi + kBin + kTrain + " model.hidden=[512]" +
                       " 'zero_optimization.offload_optimizer={\"device\": \"nvme\", \"nvme_path\": \"" + mnt_ +
                       "\"}' run.dir=" + dir);
  const std::string line = one_failure_line(r);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(line.find("[offload] cannot reserve "), std::string::npos) << line;
  EXPECT_NE(line.find(" bytes for the swap file " + mnt_ + "/"), std::string::npos) << line;
  EXPECT_NE(line.find("No space left on device"), std::string::npos) << line;
  expect_nothing_saved_changed(before);
}

// A checkpoint of an offloaded run that does not fit fails on every rank and keeps the previous.
TEST_F(FullDisk, AnOffloadedRunsCheckpointThatDoesNotFitKeepsThePrevious) {
  const std::string dir = tmpdir("nvme_ckpt_full"), ckpt = mnt_ + "/checkpoints";
  const std::string nvme = " 'zero_optimization.offload_optimizer={\"device\": \"nvme\", \"nvme_path\": \"" + dir +
                           "/swap\"}' checkpoint.dir=" + ckpt + " run.dir=" + dir;
  const Result first = run(kMpi + kBin + kTrain + " checkpoint.every_steps=10 run.max_steps=10" + nvme);
  ASSERT_EQ(first.code, 0) << first.out;
  fill_leaving(64 << 10);
  const Result r = run(kMpi + kBin + kTrain + " checkpoint.every_steps=10 run.max_steps=20 run.resume=latest" + nvme);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(one_failure_line(r).find("No space left on device"), std::string::npos) << r.out;
  fs::remove(mnt_ + "/filler");
  EXPECT_EQ(read_bytes(ckpt + "/latest"), "step_00000010\n");
  EXPECT_EQ(run(kBin + " ckpt verify " + ckpt).code, 0);
}

// Case 10: counts beyond their type are refused, not saturated.
TEST(HostileTools, GenerateRefusesTokenCountsAndSeedsOutOfRange) {
  const std::string gen = kBin + " generate --config configs/gpt_sotu.json --weights none.safetensors";
  expect_usage_error(run(gen + " --tokens 99999999999999999999", 30),
                     "'99999999999999999999' is not an integer in [0, 1000000]");
  expect_usage_error(run(gen + " --tokens 1000001", 30), "'1000001' is not an integer in [0, 1000000]");
  expect_usage_error(run(gen + " --seed 18446744073709551616", 30),
                     "'18446744073709551616' is not an integer in [0, 18446744073709551615]");
  expect_usage_error(run(gen + " --seed -1", 30), "'-1' is not an integer in [0, 18446744073709551615]");
  expect_usage_error(run(gen + " --top-k 1e3", 30), "'1e3' is not an integer");
}

// Case 11: data in a folder this user cannot search is "Permission denied", not "no such file".
// As root, the run drops to nobody (setpriv), for whom the folder is closed.
// As root the folder would be searched anyway, so the run is another user's (nobody): the binary and
// the config are copied into the test's own folder, which that user can reach wherever the clone
// lives (a clone under /root or a 0700 folder is out of nobody's reach).
TEST(HostileTools, DataInAFolderThatCannotBeSearchedSaysPermissionDenied) {
  const std::string dir = tmpdir("closed_data"), closed = dir + "/closed";
  fs::create_directories(closed);
  fs::permissions(dir, fs::perms::all);  // the run's own folder stays writable for nobody
  fs::permissions(closed, fs::perms::none);
  std::string as_user, bin = kBin, config = "configs/mnist_mlp.json";  // shell words
  if (geteuid() == 0) {
    if (!fs::exists("/usr/bin/setpriv")) GTEST_SKIP() << "setpriv (util-linux) is needed to run as nobody";
    as_user = "/usr/bin/setpriv --reuid=65534 --regid=65534 --clear-groups ";
    bin = dir + "/zerotrain", config = dir + "/mnist_mlp.json";
    fs::copy_file(ZT_BIN, bin);
    fs::copy_file(fs::path(ZT_SOURCE_DIR) / "configs/mnist_mlp.json", config);
    for (const std::string& f : {bin, config}) fs::permissions(f, fs::perms::all);
    // A temporary folder mounted noexec (or a policy) may still keep nobody from running it.
    const Result probe = run("env -C " + dir + " " + as_user + bin + " --version", 30);
    if (probe.code != 0) GTEST_SKIP() << "nobody cannot run " << bin << " here: " << probe.out;
  }
  const std::string args = kTrain.substr(0, kTrain.find("--config ")) + "--config " + config +
                           kTrain.substr(kTrain.find(" ", kTrain.find("--config ") + 9));
  for (int np : {1, 2}) {
    const Result r = run("env -C " + dir + " HOME=" + dir + " TMPDIR=" + dir + " " + as_user + launch(np) + bin +
                         args + " data.dir=" + closed + " run.dir=" + dir + "/run" + std::to_string(np));
    expect_failure(r, closed + "/train-images-idx3-ubyte: Permission denied");
  }
}

}  // namespace
