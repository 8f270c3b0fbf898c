// Note [peak memory] against the OS: real training processes (MLP, CNN, GPT at stages 0-3, N = 2,
// in memory, with optimizer offload, under a budget) whose OS peak RSS (VmHWM, read by the
// process and written as rss_peak) is within 10% of the plan made before step 1 (predicted_rss:
// the process baseline, RSS minus the allocator's bytes measured after a warm-up matrix product,
// plus the plan's resident total or the budget); then run.memory_budget_mb choosing the offload,
// and a budget nothing meets.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>

#include "e2e_util.h"

namespace {

using namespace zt::e2e;

const std::string kBin = zt::testing::shell_word(ZT_BIN);  // a shell word wherever the clone lives
const std::string kMpi = std::string(ZT_MPIRUN) + " -np ";
constexpr double kMiB = 1 << 20;

// Small data the test writes, so that reading it never sets the process's peak: MNIST-format
// IDX files and token shards in llm.c's format.
std::string write_data(const std::string& dir) {
  write_random_idx(dir + "/img", 512, 16);
  write_random_tokens(dir + "/tok", 40000, 4000);
  write_random_tokens(dir + "/bert_tok", 40000, 4000, 7, 30522);
  return dir;
}

struct Model {
  const char* name;
  std::string args;  // the config and the overrides that keep a step short
};

// The bf16 models' product path is pinned (native unless a run says f32): `auto` measures, and
// `estimate` and `train` measuring on a busy machine could choose differently.
std::vector<Model> models(const std::string& data) {
  return {{"mlp", " --config configs/mnist_mlp.json model.hidden=[1024,1024] data.dir=" + data + "/img"},
          {"cnn", " --config configs/cnn_fashion.json run.bf16_products=native data.dataset=mnist data.dir=" + data +
                      "/img"},
          {"gpt",
           " --config configs/gpt_sotu.json run.bf16_products=native model.n_layer=2 model.n_embd=64 model.n_head=2 "
           "model.block_size=64 train_batch_size=8 train_micro_batch_size_per_gpu=4 data.eval_every=0 "
           "data.dir=" +
               data + "/tok"},
          {"bert",
           " --config configs/bert_pretrain.json run.bf16_products=native model.n_layer=2 model.n_embd=64 "
           "model.n_head=2 model.block_size=64 data.seq_len=64 train_batch_size=8 train_micro_batch_size_per_gpu=4 "
           "data.eval_every=0 data.dir=" +
               data + "/bert_tok"},
          {"llama",
           " --config configs/llama_sotu.json run.bf16_products=native model.n_layer=2 model.n_embd=64 model.n_head=4 "
           "model.n_kv_head=2 model.intermediate_size=160 model.block_size=64 train_batch_size=8 "
           "train_micro_batch_size_per_gpu=4 data.eval_every=0 data.dir=" +
               data + "/tok"}};
}

struct Measured {
  double predicted, rss, before;  // baseline + plan, VmHWM at the last step, VmHWM before the plan
  nlohmann::json plan;
  double activation_peak = 0;  // the allocator's activation peak (rank 0), beside plan["activations"]
};

// Each run in a folder of its own (a run directory's metrics are appended to, never truncated).
Measured train(const std::string& args, const std::string& dir, std::string* out = nullptr) {
  static int runs = 0;
  const std::string run_dir = dir + "/run" + std::to_string(++runs);
  Result r = run(kMpi + "2 " + kBin + " train" + args + " run.max_steps=2 steps_per_print=1 run.eval_at_end=false" +
                     " run.dir=" + run_dir,
                 120);
  if (out) *out = r.out;
  EXPECT_EQ(r.code, 0) << r.out;
  if (r.code != 0) return {};
  const auto lines = read_jsonl(run_dir + "/metrics.jsonl");
  const nlohmann::json plan = lines.front()["memory_plan"];
  const nlohmann::json& last = lines[lines.size() - 2];
  if (args.find("memory_budget_mb") == std::string::npos) {  // without a budget: all that stays resident
    EXPECT_EQ(plan["predicted_rss"].get<int64_t>(),
              plan["process_baseline"].get<int64_t>() + plan["total"].get<int64_t>());
  }
  return {double(plan["predicted_rss"].get<int64_t>()), double(last["rss_peak"].get<int64_t>()),
          double(plan["rss_peak_before"].get<int64_t>()), plan, double(last["memory_peak"]["activation"].get<int64_t>())};
}

// Under AddressSanitizer (kAsan) the binary's memory is ASan's, which no plan describes.
void expect_within_10_percent(const Measured& m, const std::string& what) {
  if (kAsan) return;
  // The run's peak is its training's, not reading the data's: else this compares nothing.
  EXPECT_GT(m.predicted, 1.2 * m.before) << what;
  EXPECT_NEAR(m.predicted / m.rss, 1.0, 0.10) << what << ": predicted " << m.predicted / kMiB << " MiB, /proc "
                                              << m.rss / kMiB << " MiB; plan " << m.plan.dump();
  std::printf("[ memory   ] %-24s predicted %8.1f MiB  /proc %8.1f MiB  (%+.1f%%)\n", what.c_str(), m.predicted / kMiB,
              m.rss / kMiB, 100 * (m.predicted / m.rss - 1));
}

// `estimate` prints the plan `train` made, term by term (the data loaded is the run's own).
void expect_estimate_agrees(const std::string& args, int stage, const nlohmann::json& plan) {
  Result e = run(kBin + " estimate" + args + " run.eval_at_end=false --world 2 --json", 60);
  ASSERT_EQ(e.code, 0) << e.out;
  // The row of the run's own placement: in memory, the optimizer offloaded, or both (stage 3).
  const nlohmann::json row = nlohmann::json::parse(e.out)["stages"][stage];
  const bool opt = args.find("offload_optimizer={\"device\": \"nvme\"") != std::string::npos,
             par = args.find("offload_param={\"device\": \"nvme\"") != std::string::npos;
  const nlohmann::json peak = par   ? row["offload_both_nvme"]["peak"]
                              : opt ? row["offload_optimizer_nvme"]["peak"]
                                    : row["peak"];
  for (auto& [key, value] : peak.items()) {
    if (key == "data" || key == "total" || key == "in_use") continue;
    EXPECT_EQ(value, plan[key]) << key << ": " << e.out;
  }
  EXPECT_EQ(peak["total"].get<int64_t>() + plan["data"].get<int64_t>(), plan["total"].get<int64_t>());
}

TEST(MemoryPlan, PeakRssIsWithinTenPercentOfThePlanForEveryModelAndStage) {
  if (kAsan) GTEST_SKIP() << "RSS under AddressSanitizer is not the plan's to predict";
  const std::string dir = tmpdir("memplan"), data = write_data(dir + "/data");
  // The bf16 models (CNN, GPT) on both product paths, whatever this processor has: native is the
  // f32 path where oneDNN has no bf16 kernel, and on f32 the model computes in f32 over widened
  // copies of its bf16 weights (Note [f32 compute]).
  for (const Model& m : models(data)) {
    const bool bf16 = std::string(m.name) != "mlp";
    for (const std::string& products : bf16 ? std::vector<std::string>{"native", "f32"} : std::vector<std::string>{""})
      for (int stage = 0; stage <= 3; ++stage) {
        const std::string what =
            std::string(m.name) + " stage " + std::to_string(stage) + (bf16 ? " " + products + " products" : "");
        const std::string args = m.args + " zero_optimization.stage=" + std::to_string(stage) +
                                 (bf16 ? " run.bf16_products=" + products : "");
        const Measured r = train(args, dir);
        expect_within_10_percent(r, what);
        // Note [measured activations]: the dry run's activations against the run's own peak.
        EXPECT_NEAR(r.activation_peak / r.plan["activations"].get<double>(), 1.0, 0.05)
            << what << ": activation peak " << r.activation_peak << ", plan " << r.plan.dump();
        expect_estimate_agrees(args, stage, r.plan);
        if (products == "f32" && stage < 2) {  // each weight in bf16 and f32 (6 bytes), its gradient in bf16 (2)
          EXPECT_EQ(r.plan["param"].get<int64_t>(), 3 * r.plan["grad"].get<int64_t>()) << what;
        }
      }
  }
  // Optimizer states in swap files: memory keeps their tile buffers.
  const std::string off = " 'zero_optimization.offload_optimizer={\"device\": \"nvme\", \"nvme_path\": \"" + dir +
                          "/swap\"}' zero_optimization.sub_group_size=65536";
  const std::vector<Model> all = models(data);
  // A budget 1-2 MiB above the bytes in use at once, below the resident total: cached blocks go
  // back to the system, and the OS peak follows the budget. (Halfway between the two left only
  // 3.4 MiB to see on the f32 path, where in_use and total are closer.)
  const Measured free = train(all[2].args + " zero_optimization.stage=3", dir);
  const int64_t tight = (free.plan["in_use"].get<int64_t>() >> 20) + 2;
  const Measured held =
      train(all[2].args + " zero_optimization.stage=3 run.memory_budget_mb=" + std::to_string(tight), dir);
  EXPECT_LT(held.predicted, free.predicted - 4 * kMiB) << "budget " << tight << " MiB; plan " << free.plan.dump();
  expect_within_10_percent(held, "gpt stage 3 budget " + std::to_string(tight) + " MiB");
  for (auto [m, stage] : {std::pair{0, 2}, std::pair{2, 3}}) {
    const Model& model = all[size_t(m)];
    const std::string args = model.args + off + " zero_optimization.stage=" + std::to_string(stage);
    const Measured r = train(args, dir);
    expect_estimate_agrees(args, stage, r.plan);
    EXPECT_LT(r.plan["optim"].get<int64_t>(), 4 << 20);
    expect_within_10_percent(r, std::string(model.name) + " stage " + std::to_string(stage) + " optimizer nvme");
  }
  // Parameters in swap files too (stage 3, Note [parameter swap]): memory keeps the shards being read in.
  const std::string par = " 'zero_optimization.offload_param={\"device\": \"nvme\", \"nvme_path\": \"" + dir +
                          "/pswap\"}' zero_optimization.stage3_param_persistence_threshold=0";
  for (int m : {0, 2}) {
    const std::string args = all[size_t(m)].args + off + par + " zero_optimization.stage=3";
    const Measured r = train(args, dir);
    expect_estimate_agrees(args, 3, r.plan);
    EXPECT_GT(r.plan["param_staging"].get<int64_t>(), 0);
    expect_within_10_percent(r, std::string(all[size_t(m)].name) + " stage 3 param+optimizer nvme");
  }
  fs::remove_all(dir);
}

// Issue 29's acceptance: the allocator's peak per rank falls strictly from stage 0 to 3 at N = 2
// for GPT-2 124M's shape (bf16, T = 64; its tied wte is 31% of the model) and the MLP with four
// 4096-wide layers, on cpu and on sim (the device allocator's peak there). Stage 3 with limits a
// user who picks it for memory sets: no prefetch, no reuse, one unit live (DeepSpeed's defaults
// keep every unit of a model this small gathered).
TEST(MemoryPlan, ThePeakFallsStrictlyFromStageZeroToThree) {
  if (kAsan) GTEST_SKIP() << "full-size models: minutes under AddressSanitizer, the same allocations as Release";
  const std::string dir = tmpdir("memfall"), data = write_data(dir + "/data");
  const std::string limits =
      " zero_optimization.stage3_prefetch_bucket_size=0 zero_optimization.stage3_max_live_parameters=0"
      " zero_optimization.stage3_max_reuse_distance=0";
  const std::vector<Model> shapes = {
      {"gpt2 124m",
       " --config configs/gpt2_124m.json data.seq_len=64 data.eval_every=0 run.save_weights=false"
       " run.bf16_products=native data.dir=" +
           data + "/tok"},
      {"mlp 4x4096",
       " --config configs/mnist_mlp.json model.hidden=[4096,4096,4096,4096] run.save_weights=false"
       " data.dir=" +
           data + "/img"}};
  for (const Model& m : shapes)
    for (const std::string device : {"cpu", "sim"}) {
      int64_t last = 0;
      for (int stage = 0; stage <= 3; ++stage) {
        const std::string run_dir = dir + "/" + std::to_string(stage) + device + (m.name[0] == 'g' ? "g" : "m");
        const Result r = run(kMpi + "2 " + kBin + " train" + m.args + limits + " run.device=" + device +
                                 " zero_optimization.stage=" + std::to_string(stage) +
                                 " run.max_steps=1 run.eval_at_end=false run.dir=" + run_dir,
                             300);
        ASSERT_EQ(r.code, 0) << r.out;
        const auto lines = read_jsonl(run_dir + "/metrics.jsonl");
        const nlohmann::json& rec = lines[lines.size() - 2];
        const int64_t peak = rec[device == "cpu" ? "memory" : "device_memory"]["peak"].get<int64_t>();
        std::printf("[ peak     ] %-10s %s stage %d: %.1f MiB\n", m.name, device.c_str(), stage, double(peak) / kMiB);
        if (stage > 0) {
          EXPECT_LT(peak, last) << m.name << " on " << device << ", stage " << stage;
        }
        last = peak;
      }
    }
  fs::remove_all(dir);
}

// Note [budget choice]: "auto" offloads only what the budget needs, and says why.
TEST(MemoryPlan, ABudgetChoosesTheLeastOffloadThatFits) {
  const std::string dir = tmpdir("memplan_auto"), data = write_data(dir + "/data");
  const std::string args = models(data)[0].args + " zero_optimization.stage=1" +
                           " 'zero_optimization.offload_optimizer={\"device\": \"auto\", \"nvme_path\": \"" + dir +
                           "/swap\"}' zero_optimization.sub_group_size=65536";
  std::string out;
  const Measured free = train(args, dir, &out);  // no budget: auto means none
  EXPECT_NE(out.find("offload auto -> none: no run.memory_budget_mb"), std::string::npos) << out;
  const int64_t mem = free.plan["in_use"].get<int64_t>();  // what a budget holds
  // A budget 1 MiB above the in-memory peak keeps the states in memory.
  const Measured fits = train(args + " run.memory_budget_mb=" + std::to_string((mem >> 20) + 1), dir, &out);
  EXPECT_NE(out.find("offload_optimizer auto -> none: predicted peak"), std::string::npos) << out;
  EXPECT_EQ(fits.plan["optim"], free.plan["optim"]);
  // 1 MiB below: the optimizer goes to disk, and the run's metrics show the swap files at work.
  const Measured low = train(args + " run.memory_budget_mb=" + std::to_string((mem >> 20) - 1), dir, &out);
  EXPECT_NE(out.find("offload_optimizer auto -> nvme: predicted peak"), std::string::npos) << out;
  EXPECT_NE(out.find("would need"), std::string::npos) << out;
  EXPECT_LT(low.plan["in_use"].get<int64_t>(), (mem >> 20) << 20);
  EXPECT_GT(low.plan["optim"].get<int64_t>(), 0);
  EXPECT_LT(low.plan["optim"].get<int64_t>(), free.plan["optim"].get<int64_t>());
  EXPECT_NE(out.find("offload_optimizer: nvme"), std::string::npos) << out;  // the engine's start line
  expect_within_10_percent(low, "mlp stage 1 auto -> nvme");
  // estimate says what train will choose (its numbers lack the data, which train has loaded).
  const std::string low_budget = " run.memory_budget_mb=" + std::to_string((mem >> 20) - 1);
  Result e = run(kBin + " estimate" + args + low_budget + " run.eval_at_end=false --world 2 --json", 60);
  ASSERT_EQ(e.code, 0) << e.out;
  const nlohmann::json plan = nlohmann::json::parse(e.out)["budget_plan"];
  ASSERT_FALSE(plan["choices"].empty()) << e.out;
  const std::string choice = plan["choices"][0].get<std::string>();
  EXPECT_NE(out.find(choice.substr(0, choice.find(": predicted"))), std::string::npos) << e.out << "\n" << out;
  EXPECT_NE(choice.find("offload_optimizer auto -> nvme"), std::string::npos) << choice;
  // 8 MiB: nothing fits; one line before training names the smallest peak and its settings.
  Result r = run(kBin + " train" + args + " run.memory_budget_mb=8 run.dir=" + dir + "/run8", 60);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_EQ(count_lines(r.out), 1) << r.out;
  EXPECT_NE(r.out.find("the smallest predicted peak is"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("with offload_optimizer nvme"), std::string::npos) << r.out;
  Result e8 = run(kBin + " estimate" + args + " run.memory_budget_mb=8 --world 1 --json", 60);
  ASSERT_EQ(e8.code, 0) << e8.out;
  const std::string error = nlohmann::json::parse(e8.out)["budget_plan"]["error"].get<std::string>();
  EXPECT_NE(error.find("[budget] run.memory_budget_mb = 8 (8.00MiB per rank) cannot hold this run"), std::string::npos)
      << error;
  const size_t with = error.find(" with "), terms = error.find(" (states");
  ASSERT_TRUE(with != std::string::npos && terms != std::string::npos) << error;
  EXPECT_NE(r.out.find(error.substr(with, terms - with)), std::string::npos) << error << "\n" << r.out;
  fs::remove_all(dir);
}

}  // namespace
