// DeepSpeed configs as the Hugging Face Trainer and Accelerate ship them (tests/e2e/deepspeed/:
// transformers' tests/deepspeed/ds_config_zero{2,3}.json, Accelerate's zero_stage3_config.json),
// unchanged but for our model, data and run sections: each "auto" resolved with one line
// (Note [auto values]), 5 steps at N = 2, and the TensorBoard event file and CSV files a run
// writes read back with every scalar of its metrics.
#include <gtest/gtest.h>


#include "../monitor/event_reader.h"
#include "e2e_util.h"

namespace {

using namespace zt::e2e;

const std::string kBin = zt::testing::shell_word(ZT_BIN);
const std::string kMpi = std::string(ZT_MPIRUN) + " -np ";

// Every "auto" in a JSON document.
int autos(const nlohmann::json& j) {
  if (j.is_string()) return j.get<std::string>() == "auto";
  int n = 0;
  if (j.is_structured())
    for (const auto& v : j) n += autos(v);
  return n;
}

// Every number of a metrics record, nested objects joined by '/', as the monitors tag them.
void numbers(const std::string& tag, const nlohmann::json& v, std::map<std::string, double>& out) {
  if (v.is_number())
    out[tag] = v.get<double>();
  else if (v.is_object())
    for (const auto& [k, c] : v.items()) numbers(tag + "/" + k, c, out);
}

class DeepSpeedConfigs : public ::testing::TestWithParam<const char*> {};

TEST_P(DeepSpeedConfigs, TrainFiveStepsUnchangedWithEveryAutoSaidAndEveryScalarInTheMonitors) {
  const std::string name = GetParam(), file = std::string(ZT_SOURCE_DIR) + "/tests/e2e/deepspeed/" + name + ".json";
  const std::string dir = tmpdir("ds_" + name);
  write_random_tokens(dir + "/tok", 20000, 4000);
  const std::string sections =
      " 'model={\"type\":\"gpt\",\"n_layer\":1,\"n_embd\":32,\"n_head\":2,\"block_size\":32}'"
      " 'data={\"dataset\":\"tokens\",\"dir\":\"" + dir + "/tok\",\"eval_batches\":2,\"eval_every\":5}'"
      " 'run={\"max_steps\":5,\"dir\":\"" + dir + "/run\"}'"
      " 'tensorboard={\"enabled\":true,\"output_path\":\"" + dir + "/tb\",\"job_name\":\"job\"}'"
      " 'csv_monitor={\"enabled\":true,\"output_path\":\"" + dir + "/csv\",\"job_name\":\"job\"}'"
      " 'wandb={\"enabled\":true,\"project\":\"p\"}' steps_per_print=1";
  const Result r = run(kMpi + "2 " + kBin + " train --config " + file + sections, 300);
  ASSERT_EQ(r.code, 0) << r.out;
  // One line per "auto" of the file (the bucket sizes' name the hidden size they scale with), and
  // wandb's, which says where the scalars go instead.
  EXPECT_EQ(count_of(r.out, "\"auto\" -> "), autos(read_json(file))) << r.out;
  EXPECT_EQ(count_of(r.out, "zerotrain: config: wandb is not available here"), 1) << r.out;
  EXPECT_EQ(count_of(r.out, "step 5/5"), 1) << r.out;

  // Every scalar of every metrics record, at its step in samples (train_batch_size 16).
  std::map<std::pair<std::string, int64_t>, double> want;
  for (const nlohmann::json& rec : read_jsonl(dir + "/run/metrics.jsonl")) {
    if (!rec.contains("step") || rec.contains("event")) continue;
    const bool eval = rec.contains("val_loss");
    std::map<std::string, double> flat;
    for (const auto& [k, v] : rec.items())
      if (k != "step") numbers(std::string(eval ? "Eval" : "Train") + "/Samples/" + k, v, flat);
    for (const auto& [tag, v] : flat) want[{tag, rec["step"].get<int64_t>() * 16}] = v;
  }
  ASSERT_GT(want.size(), 20u);
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir + "/tb/job")) files.push_back(e.path());
  ASSERT_EQ(files.size(), 1u);
  const auto events = zt::monitor::test_util::read_events(files[0].string());  // CRCs checked
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events[0].file_version.value_or(""), "brain.Event:2");
  std::map<std::pair<std::string, int64_t>, float> got;
  for (const auto& e : events)
    for (const auto& v : e.values) got[{v.tag, e.step}] = v.value;
  for (const auto& [key, v] : want) {
    ASSERT_TRUE(got.count(key)) << key.first << " at " << key.second;
    EXPECT_EQ(got[key], float(v)) << key.first;
  }
  EXPECT_TRUE(got.count({"Train/Samples/loss", 16}));
  EXPECT_TRUE(got.count({"Eval/Samples/val_loss", 80}));
  // The CSV files: one per tag, DeepSpeed's names.
  EXPECT_TRUE(fs::exists(dir + "/csv/job/Train_Samples_loss.csv"));
  EXPECT_EQ(slurp(dir + "/csv/job/Train_Samples_loss.csv").substr(0, 10), "step,loss\r");
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(HfAndAccelerate, DeepSpeedConfigs,
                         ::testing::Values("hf_ds_config_zero2", "hf_ds_config_zero3", "accelerate_zero_stage3_config"));

// wall_clock_breakdown, comms_logger and flops_profiler: each says what DeepSpeed's does, on its
// line and in the metrics records; the step cost (tokens/s, ms per step, MFU) is on every print.
TEST(DeepSpeedConfigsAlone, WallClockCommsLoggerAndFlopsProfilerSayWhatAStepCosts) {
  const std::string dir = tmpdir("ds_profilers");
  write_random_tokens(dir + "/tok", 20000, 4000);
  const Result r = run(kMpi + "2 " + kBin +
                           " train --config configs/gpt_sotu.json model.n_layer=1 model.n_embd=32 model.n_head=2"
                           " model.block_size=32 train_batch_size=8 train_micro_batch_size_per_gpu=4 run.max_steps=4"
                           " steps_per_print=2 data.eval_batches=2 zero_optimization.stage=2 wall_clock_breakdown=true"
                           " comms_logger.enabled=true flops_profiler.enabled=true flops_profiler.profile_step=3"
                           " data.dir=" + dir + "/tok run.dir=" + dir + "/run",
                       300);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(count_of(r.out, "wall_clock_breakdown: forward "), 2) << r.out;
  EXPECT_EQ(count_of(r.out, "step 4: flops_profiler: "), 1) << r.out;  // the print holding step 3
  EXPECT_NE(r.out.find("zerotrain: comms_logger: rank 0's collectives of the run: "), std::string::npos) << r.out;
  EXPECT_EQ(count_of(r.out, " tokens/s | "), 2) << r.out;
  EXPECT_NE(r.out.find("start-up "), std::string::npos) << r.out;
  int steps = 0;
  for (const nlohmann::json& rec : read_jsonl(dir + "/run/metrics.jsonl")) {
    if (!rec.contains("loss")) continue;
    ++steps;
    EXPECT_GT(rec["forward_ms"].get<double>(), 0) << rec.dump();
    EXPECT_GT(rec["mfu"].get<double>(), 0) << rec.dump();
    EXPECT_GT(rec["tokens_per_s"].get<double>(), 0) << rec.dump();
    EXPECT_GT(rec["comms"]["reduce_scatter"]["calls"].get<int64_t>(), 0) << rec.dump();  // stage 2 reduce-scatters
  }
  EXPECT_EQ(steps, 2);
  const nlohmann::json s = read_json(dir + "/run/summary.json");
  // 6 N + 12 n_layer n_embd T per token (T = 32), 8 sequences of 32 tokens a step.
  const double n = s["parameters"].get<double>();
  EXPECT_EQ(s["flops_per_step"].get<double>(), 8.0 * 32 * (6 * n + 12.0 * 1 * 32 * 32));
  EXPECT_GT(s["final_eval_seconds"].get<double>(), 0);
  fs::remove_all(dir);
}

// Note [model registry]: a config without a model section no longer trains the MNIST MLP.
TEST(DeepSpeedConfigsAlone, WithoutAModelSectionAreOneLineNamingTheModelTypes) {
  const std::string file = std::string(ZT_SOURCE_DIR) + "/tests/e2e/deepspeed/hf_ds_config_zero2.json";
  const Result r = run(kBin + " train --config " + file, 60);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_EQ(count_lines(r.out), 1) << r.out;
  EXPECT_NE(r.out.find("has no 'model' section: set model.type (one of mlp, cnn, gpt, bert, resmlp, llama)"),
            std::string::npos)
      << r.out;
}

}  // namespace
