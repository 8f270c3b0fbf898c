// Checkpoints through `zerotrain train`: a run stopped at step 20 and resumed (run.resume=latest)
// logs the same losses as one that never stopped, bit for bit at the same world size and stage;
// resumed at another world size and stage it follows within fp32 reduction order.
#include <gtest/gtest.h>

#include <map>

#include "e2e_util.h"

using namespace zt::e2e;

namespace {

const std::string kBin = zt::testing::shell_word(ZT_BIN);  // a shell word wherever the clone lives
const std::string kMpi = std::string(ZT_MPIRUN) + " -np ";
const std::string kArgs =
    " --config configs/mnist_mlp.json data.train_limit=6400 run.eval_at_end=false steps_per_print=10"
    " gradient_accumulation_steps=2 train_batch_size=64";

const std::string kF32Compute = "bf16.enabled=true run.bf16_products=f32";

struct Case {
  std::string precision;  // "", "bf16.enabled=true", or that on the f32 path (Note [f32 compute])
  int stage_saved, stage_resumed, np_saved, np_resumed;
  // offload_optimizer.device = nvme (Note [optimizer swap]), and at stage 3 offload_param too
  bool offload_saved = false, offload_resumed = false;
};
void PrintTo(const Case& c, std::ostream* os) {
  *os << c.precision << " stage " << c.stage_saved << "->" << c.stage_resumed << " np " << c.np_saved << "->"
      << c.np_resumed << (c.offload_saved ? " from nvme" : "") << (c.offload_resumed ? " to nvme" : "");
}

// The overrides that put the optimizer states (and at stage 3 the parameters) in swap files under dir.
std::string nvme(bool on, int stage, const std::string& dir) {
  if (!on) return "";
  const std::string to = "={\"device\": \"nvme\", \"nvme_path\": \"" + dir + "/swap\"}'";
  return " 'zero_optimization.offload_optimizer" + to + " zero_optimization.sub_group_size=100000" +
         (stage == 3 ? " 'zero_optimization.offload_param" + to : "");
}
class Resume : public ::testing::TestWithParam<Case> {};

TEST_P(Resume, TheLossesContinueAsIfNeverStopped) {
  if (!have_mnist()) GTEST_SKIP() << "MNIST not installed (scripts/setup.sh)";
  const Case c = GetParam();
  // One folder pair per case: ctest runs the cases of this binary in parallel.
  std::string id = "_";  // appending only: GCC 12 warns falsely (-Wrestrict) on "literal" + std::string
  for (int v : {c.stage_saved, c.stage_resumed, c.np_saved, c.np_resumed}) id += std::to_string(v);
  if (!c.precision.empty()) id += "bf16";
  if (c.precision.find("bf16_products=f32") != std::string::npos) id += "f32c";
  if (c.offload_saved || c.offload_resumed)
    id += std::string("nvme") + (c.offload_saved ? "s" : "") + (c.offload_resumed ? "r" : "");
  const std::string whole = tmpdir("resume_whole" + id), parts = tmpdir("resume_parts" + id);
  const std::string common = kArgs + " " + c.precision + " run.max_steps=40";
  auto train = [&](int np, int stage, const std::string& dir, const std::string& more) {
    return run(kMpi + std::to_string(np) + " " + kBin + " train" + common +
               " zero_optimization.stage=" + std::to_string(stage) + " run.dir=" + dir + more);
  };
  Result a = train(c.np_saved, c.stage_saved, whole, "");
  ASSERT_EQ(a.code, 0) << a.out;
  // Stopped after 20 of the 40 steps (the schedule is the 40-step one: total_num_steps=40).
  Result b = train(c.np_saved, c.stage_saved, parts,
                   " checkpoint.every_steps=20 run.max_steps=20 scheduler.params.total_num_steps=40" +
                       nvme(c.offload_saved, c.stage_saved, parts));
  ASSERT_EQ(b.code, 0) << b.out;
  Result r =
      train(c.np_resumed, c.stage_resumed, parts,
            " run.resume=latest scheduler.params.total_num_steps=40" + nvme(c.offload_resumed, c.stage_resumed, parts));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("resumed from"), std::string::npos) << r.out;
  const auto want = logged_losses(whole), got = logged_losses(parts);
  for (int64_t step : {30, 40}) {
    ASSERT_TRUE(got.count(step) && want.count(step)) << r.out;
    if (c.np_saved == c.np_resumed && c.stage_saved == c.stage_resumed)
      EXPECT_EQ(got.at(step), want.at(step)) << step;
    else
      // Another reduction order: bf16 gradients round differently in their last bits.
      EXPECT_NEAR(got.at(step), want.at(step), (c.precision.empty() ? 1e-4 : 1e-3) * std::max(1.0, want.at(step)))
          << step;
  }
}

INSTANTIATE_TEST_SUITE_P(Train, Resume,
                         ::testing::Values(Case{"", 2, 2, 2, 2}, Case{"bf16.enabled=true", 3, 3, 2, 2},
                                           Case{"", 2, 3, 2, 1}, Case{"", 0, 2, 1, 2}, Case{"", 3, 3, 2, 2, true, true},
                                           Case{"bf16.enabled=true", 2, 2, 2, 2, true, false},
                                           Case{"", 2, 2, 2, 1, true, false}, Case{"", 1, 3, 2, 2, false, true},
                                           Case{"bf16.enabled=true", 3, 3, 2, 2, true, false},
                                           Case{"bf16.enabled=true", 3, 3, 2, 1, true, false},
                                           // a load refreshes the f32 copies the model computes with
                                           Case{kF32Compute, 1, 1, 2, 2}, Case{kF32Compute, 0, 3, 1, 2}));

// Issue 31: everything a step depends on beyond the checkpointed tensors comes back typed and
// exact: the warmup-cosine schedule (its position is the optimizer step), the data position
// mid-epoch and the dropout stream (seeded by step and micro-batch). A GPT with dropout stopped
// after 6 of 12 steps and resumed logs the same loss and learning rate at every later step.
TEST(Resume, GptWithDropoutAndAWarmupCosineScheduleContinuesBitForBit) {
  const std::string root = tmpdir("resume_gpt"), whole = root + "/whole", parts = root + "/parts";
  write_random_tokens(root + "/tok", 20000, 2000);
  const std::string args = " --config configs/gpt_sotu.json model.n_layer=2 model.n_embd=64 model.n_head=2"
                           " model.block_size=32 model.dropout=0.1 train_batch_size=8 train_micro_batch_size_per_gpu=2"
                           " scheduler.params.warmup_num_steps=4 scheduler.params.total_num_steps=12 data.eval_every=0"
                           " run.eval_at_end=false steps_per_print=1 data.dir=" + root + "/tok";
  auto train = [&](const std::string& dir, const std::string& more) {
    return run(kMpi + "2 " + kBin + " train" + args + " run.dir=" + dir + more, 300);
  };
  Result a = train(whole, " run.max_steps=12");
  ASSERT_EQ(a.code, 0) << a.out;
  Result b = train(parts, " run.max_steps=6 checkpoint.every_steps=6 checkpoint.dir=" + parts + "/ckpt");
  ASSERT_EQ(b.code, 0) << b.out;
  Result r = train(parts, " run.max_steps=12 run.resume=latest checkpoint.dir=" + parts + "/ckpt");
  ASSERT_EQ(r.code, 0) << r.out;
  std::map<int64_t, std::pair<double, double>> want, got;  // step -> loss, lr
  for (auto [dir, out] : {std::pair{whole, &want}, std::pair{parts, &got}})
    for (const auto& j : read_jsonl(dir + "/metrics.jsonl"))
      if (j.contains("loss") && j.contains("lr")) (*out)[j["step"].get<int64_t>()] = {j["loss"], j["lr"]};
  for (int64_t step = 7; step <= 12; ++step) {
    ASSERT_TRUE(want.count(step) && got.count(step)) << step << ": " << r.out;
    EXPECT_EQ(got.at(step).first, want.at(step).first) << "loss at step " << step;
    EXPECT_EQ(got.at(step).second, want.at(step).second) << "lr at step " << step;
  }
}

TEST(Resume, ALaterStepThanTheRunHasIsAClearError) {
  if (!have_mnist()) GTEST_SKIP() << "MNIST not installed (scripts/setup.sh)";
  const std::string dir = tmpdir("resume_late");
  ASSERT_EQ(run(kBin + " train" + kArgs + " run.max_steps=4 checkpoint.every_steps=4 run.dir=" + dir).code, 0);
  Result r = run(kBin + " train" + kArgs + " run.max_steps=4 run.resume=latest run.dir=" + dir);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("is at step 4; this run has 4 steps in all"), std::string::npos) << r.out;
  Result m = run(kBin + " train" + kArgs + " run.max_steps=8 run.resume=step_99 run.dir=" + dir);
  EXPECT_EQ(m.code, 1);
  EXPECT_NE(m.out.find("no checkpoint 'step_99'"), std::string::npos) << m.out;
}

}  // namespace
