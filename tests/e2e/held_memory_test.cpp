// Host memory held while saving, loading, exporting and importing (issue 31): a model whose states
// are several times run.memory_budget_mb (an MLP of 17.7M parameters: 71 MB of fp32 weights, about
// 280 MB of states with AdamW, swapped to files) is saved, resumed, exported and imported, and the
// OS's peak RSS of every process of each job stays within the process baseline plus the budget:
// each streams a chunk at a time, and none ever holds the model whole.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "e2e_util.h"

namespace {

using namespace zt::e2e;

const std::string kBin = zt::testing::shell_word(ZT_BIN);
const std::string kMpi = std::string(ZT_MPIRUN) + " -np 2 ";
constexpr int64_t kMiB = 1 << 20;
constexpr int kBudgetMb = 128;

// Runs `cmd` in the source folder and returns its exit status and the largest peak RSS of it and
// every process it waited for (mpirun's ranks), in bytes: the OS's view, not the allocator's.
std::pair<int, int64_t> run_measured(const std::string& cmd, std::string& out) {
  const std::string log = fs::temp_directory_path() / ("zt_held_" + std::to_string(getpid()) + ".log");
  const std::string full = "cd " + zt::testing::shell_word(ZT_SOURCE_DIR) + " && timeout -k 5 300 " + cmd + " > " +
                           zt::testing::shell_word(log) + " 2>&1";
  const pid_t pid = fork();
  if (pid == 0) {
    execl("/bin/sh", "sh", "-c", full.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  int st = 0;
  struct rusage ru{};
  wait4(pid, &st, 0, &ru);
  out = slurp(log);
  fs::remove(log);
  return {WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st), int64_t(ru.ru_maxrss) * 1024};
}

TEST(HeldMemory, SaveLoadExportAndImportStayWithinTheBudget) {
  if (kAsan) GTEST_SKIP() << "RSS under AddressSanitizer is not the program's to bound";
  const std::string dir = tmpdir("held_memory");
  write_random_idx(dir + "/img", 256, 16);
  const std::string nvme = "{\"device\": \"nvme\", \"nvme_path\": \"" + dir + "/nvme\"}";
  const std::string args = " --config configs/mnist_mlp.json model.hidden=[1536,1536,1536,1536,1536,1536,1536,1536]"
                           " data.dir=" + dir + "/img train_batch_size=32 zero_optimization.stage=3"
                           " 'zero_optimization.offload_optimizer=" + nvme + "' 'zero_optimization.offload_param=" +
                           nvme + "' run.memory_budget_mb=" + std::to_string(kBudgetMb) +
                           " run.eval_at_end=false steps_per_print=1 checkpoint.every_steps=2 checkpoint.dir=" + dir +
                           "/ckpt";
  std::string out;
  // Train two steps and save (checkpoint and final weights), then resume: load, one step, save.
  auto [code, save_peak] = run_measured(kMpi + kBin + " train" + args + " run.max_steps=2 run.dir=" + dir + "/run", out);
  ASSERT_EQ(code, 0) << out;
  const std::vector<nlohmann::json> lines = read_jsonl(dir + "/run/metrics.jsonl");
  const nlohmann::json plan = lines.front()["memory_plan"];
  const int64_t baseline = plan["process_baseline"].get<int64_t>(), budget = int64_t(kBudgetMb) * kMiB;
  // The model's states are far past the budget, so holding any of them whole would show.
  const int64_t params = 784 * 1536 + 7 * 1536 * 1536 + 1536 * 10, weights = 4 * params, states = 16 * params;
  ASSERT_GT(states, 2 * budget) << "the test model's states must be far past the budget";
  auto [code2, load_peak] = run_measured(kMpi + kBin + " train" + args + " run.max_steps=3 run.resume=latest run.dir=" +
                                             dir + "/run2",
                                         out);
  ASSERT_EQ(code2, 0) << out;
  ASSERT_NE(out.find("resumed"), std::string::npos) << out;
  // Export the step-3 checkpoint's fp32 weights (71 MB); import them into a fresh checkpoint.dir.
  auto [code3, export_peak] =
      run_measured(kBin + " export " + dir + "/ckpt --out " + dir + "/weights.safetensors", out);
  ASSERT_EQ(code3, 0) << out;
  ASSERT_EQ(fs::file_size(dir + "/weights.safetensors") > uint64_t(weights), true);
  auto [code4, import_peak] =
      run_measured(kMpi + kBin + " import " + dir + "/weights.safetensors --out " + dir + "/imported" + args, out);
  ASSERT_EQ(code4, 0) << out;
  auto [code5, ls_peak] = run_measured(kBin + " ckpt ls " + dir + "/ckpt", out);
  ASSERT_EQ(code5, 0) << out;
  std::printf("[ held     ] ckpt ls peak RSS %.1f MiB\n", double(ls_peak) / kMiB);
  for (auto [what, peak] : {std::pair{"train and save", save_peak}, std::pair{"resume (load) and save", load_peak},
                            std::pair{"export", export_peak}, std::pair{"import", import_peak}}) {
    std::printf("[ held     ] %-24s peak RSS %6.1f MiB (baseline %.1f + budget %d MiB = %.1f; weights %.1f MiB)\n",
                what, double(peak) / kMiB, double(baseline) / kMiB, kBudgetMb, double(baseline + budget) / kMiB,
                double(weights) / kMiB);
    EXPECT_LE(peak, baseline + budget) << what;
  }
  // Export alone holds one chunk beyond what a process that reads only the metadata holds: less
  // than half the weights it writes.
  EXPECT_LT(export_peak, ls_peak + weights / 2);
}

}  // namespace
