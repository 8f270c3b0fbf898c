// Hostile input at the command line (issue 11): each reproducer ends with exit 1 (or 2 for bad
// usage) and one line that says what is wrong, instead of a crash, a hang or a silent wrong run.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "e2e_util.h"

namespace {

using namespace zt::e2e;

const std::string kBin = zt::testing::shell_word(ZT_BIN);  // a shell word wherever the clone lives
const std::string kConfig = " --config configs/mnist_mlp.json";
// A quick run on the first 640 samples: 10 steps per epoch at batch 64.
const std::string kSmall = " data.train_limit=640 run.eval_at_end=false";

bool has(const Result& r, const std::string& what) { return r.out.find(what) != std::string::npos; }

std::string nested(int depth) { return std::string(size_t(depth), '[') + std::string(size_t(depth), ']'); }

TEST(HostileCli, DeeplyNestedConfigsEndWithOneShortLine) {
  Result o = run(kBin + " estimate" + kConfig + " --world 1 'model=" + nested(53'000) + "'");
  EXPECT_EQ(o.code, 1) << o.out.substr(0, 500);
  EXPECT_EQ(count_lines(o.out), 1);
  EXPECT_TRUE(has(o, "nests deeper than 64 levels")) << o.out.substr(0, 500);
  EXPECT_LT(o.out.size(), 400u);
  const std::string d = tmpdir("deep");
  std::ofstream(d + "/deep.json") << "{\"scheduler\": {\"params\": {\"x\": " << nested(53'000) << "}}}";
  Result f = run(kBin + " train --config " + d + "/deep.json run.dir=" + d + "/run");
  EXPECT_EQ(f.code, 1) << f.out.substr(0, 500);
  EXPECT_TRUE(has(f, "deep.json: JSON nests deeper than 64 levels at byte offset 92")) << f.out.substr(0, 500);
  EXPECT_FALSE(fs::exists(d + "/run"));
}

TEST(HostileCli, ModelsTooLargeToCountOrAllocateEndWithOneLineSayingWhy) {
  Result count = run(kBin + " estimate" + kConfig + " --world 1 'model.hidden=[4611686018427387904]'");
  EXPECT_EQ(count.code, 1) << count.out;
  EXPECT_EQ(count_lines(count.out), 1) << count.out;
  EXPECT_TRUE(has(count, "give more parameters than 64-bit sizes can count")) << count.out;
  // estimate plans it (the model is built with shapes only); eval, which needs it whole, says why
  // it cannot; train fails at the first buffer the system refuses.
  Result plan =
      run(kBin + " estimate" + kConfig + " --world 1024 --json train_batch_size=1024 'model.hidden=[1000000000000]'");
  EXPECT_EQ(plan.code, 0) << plan.out;
  EXPECT_TRUE(has(plan, "\"parameters\": 795000000000010")) << plan.out;
  Result alloc = run(kBin + " eval" + kConfig + " 'model.hidden=[1000000000000]'");
  EXPECT_EQ(alloc.code, 1) << alloc.out;
  EXPECT_EQ(count_lines(alloc.out), 1) << alloc.out;
  EXPECT_TRUE(has(alloc,
                  "zerotrain: error: [model] the model's 795000000000010 parameters need "
                  "3180000000000040 bytes"))
      << alloc.out;
  EXPECT_FALSE(has(alloc, "bad_alloc")) << alloc.out;
  // (Under ASan the refused allocation must return null, as malloc does, instead of aborting.)
  Result train = run("env ASAN_OPTIONS=allocator_may_return_null=1:detect_leaks=0 " + kBin + " train" + kConfig +
                     " 'model.hidden=[1000000000000]' run.dir=" + tmpdir("huge") + "/run");
  EXPECT_EQ(train.code, 1) << train.out;
  EXPECT_EQ(count_of(train.out, "zerotrain:"), 1) << train.out;  // ASan adds a warning line of its own
  EXPECT_TRUE(has(train, "the system refused")) << train.out;
}

TEST(HostileCli, ThreadsBeyondTheLimitAreAConfigErrorSayingTheRange) {
  Result r = run(kBin + " train" + kConfig + " run.threads=100000 run.dir=" + tmpdir("threads") + "/run");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_EQ(count_lines(r.out), 1) << r.out;
  EXPECT_TRUE(has(r, "'run.threads' must be an integer in 0..1024, got 100000")) << r.out;
}

TEST(HostileCli, EpochsWhoseStepCountOverflowsAreRejectedBeforeTraining) {
  if (!have_mnist()) GTEST_SKIP() << "MNIST not installed (scripts/setup.sh)";
  const std::string d = tmpdir("epochs");
  Result r = run(kBin + " train" + kConfig + kSmall + " run.epochs=1e18 run.dir=" + d + "/run");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_EQ(count_lines(r.out), 1) << r.out;
  EXPECT_TRUE(has(r, "'run.epochs' = 1e+18 at 10 steps per epoch gives more steps than int64 can count")) << r.out;
  EXPECT_FALSE(fs::exists(d + "/run/metrics.jsonl"));
  // Just below the limit the count is exact (a run of 9e17 steps; only its plan is checked here).
  Result ok = run("ZT_FAULT=exit:rank=0:step=1 " + kBin + " train" + kConfig + kSmall +
                  " run.epochs=9e16 run.dir=" + d + "/ok");
  EXPECT_EQ(ok.code, 3) << ok.out;
  EXPECT_TRUE(has(ok, "900000000000000000 steps")) << ok.out;
}

TEST(HostileCli, MemoryGibMustBeAPositiveSizeWhoseBytesFit) {
  for (const char* g : {"1e10", "inf", "nan", "-3", "0"}) {
    Result r = run(kBin + " estimate" + kConfig + " --world 1 --memory-gib " + g);
    EXPECT_EQ(r.code, 2) << g << ": " << r.out;
    EXPECT_TRUE(has(r, "is not a number > 0 (GiB, below 8589934592)")) << r.out;
  }
  // The largest accepted budget over many ranks: counts clamp, none is negative.
  Result r = run(kBin + " estimate" + kConfig + " --world 1000 --memory-gib 8589934591 --json train_batch_size=1000");
  ASSERT_EQ(r.code, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  for (const auto& row : j["stages"]) EXPECT_GT(row["max_params"].get<int64_t>(), 0) << row.dump();
  EXPECT_EQ(j["stages"][3]["max_params"].get<int64_t>(), INT64_MAX);
}

TEST(HostileCli, FaultSpecsThatAreMalformedOrCannotFireAreRejected) {
  if (!have_mnist()) GTEST_SKIP() << "MNIST not installed (scripts/setup.sh)";
  const std::string d = tmpdir("fault");
  const std::pair<const char*, const char*> cases[] = {
      {"stall:rank=x:step=3", "ZT_FAULT 'rank=x': the rank must be an integer >= 0"},
      {"stall:rank=0:step=3x", "ZT_FAULT 'step=3x': the step must be an integer >= 1"},
      {"exit:rank=0:step=1:rank=1", "ZT_FAULT gives 'rank' twice"},
      {"exit:rank=1:step=3", "ZT_FAULT rank=1 never fires: the job has 1 rank (0..0)"},
      {"exit:rank=0:step=7", "ZT_FAULT step=7 never fires: the run has 5 steps (step K+1 is the final save)"},
      {"exit:rank=0:step=6:at=save", "ZT_FAULT step=6 never fires: the run has 5 steps"},
      {"exit:rank=0:step=2:at=later", "ZT_FAULT 'at=later' unknown (allowed: at=step, at=save)"}};
  for (const auto& [spec, want] : cases) {
    Result r = run(std::string("ZT_FAULT=") + spec + " " + kBin + " train" + kConfig + kSmall +
                   " run.max_steps=5 checkpoint.every_steps=1 run.dir=" + d + "/run");
    EXPECT_EQ(r.code, 1) << spec << ": " << r.out;
    EXPECT_EQ(count_lines(r.out), 1) << r.out;
    EXPECT_TRUE(has(r, want)) << spec << ": " << r.out;
  }
  Result fires = run("ZT_FAULT=exit:rank=0:step=5 " + kBin + " train" + kConfig + kSmall +
                     " run.max_steps=5 run.dir=" + d + "/run");
  EXPECT_EQ(fires.code, 3) << fires.out;
  EXPECT_FALSE(fs::exists(d + "/run/model.safetensors"));
}

// Issue 15 (b): at=save with no checkpoint at that step, and step K+1 (the final save, rank 0's
// alone) on another rank, were accepted and never fired.
TEST(HostileCli, FaultSpecsThatNeverMeetTheirSaveAreRejected) {
  if (!have_mnist()) GTEST_SKIP() << "MNIST not installed (scripts/setup.sh)";
  const std::string d = tmpdir("fault_save");
  const std::string train = kBin + " train" + kConfig + kSmall + " run.max_steps=5 run.dir=" + d + "/run";
  const std::pair<std::string, std::string> cases[] = {
      {"ZT_FAULT=exit:rank=0:step=2:at=save " + train,
       "zerotrain: error: [fault] ZT_FAULT at=save never fires: checkpoint.every_steps is 0, so no checkpoint is "
       "saved\n"},
      {"ZT_FAULT=exit:rank=0:step=3:at=save " + train + " checkpoint.every_steps=2",
       "zerotrain: error: [fault] ZT_FAULT step=3:at=save never fires: checkpoints are saved every 2 steps and after "
       "the last (step 5)\n"}};
  for (const auto& [cmd, want] : cases) {
    Result r = run(cmd);
    EXPECT_EQ(r.code, 1) << cmd << ": " << r.out;
    EXPECT_EQ(r.out, want) << cmd;
    EXPECT_FALSE(fs::exists(d + "/run/model.safetensors"));
  }
  // The final save's step on rank 1: said once, by rank 0, for both ranks.
  Result k1 = run("env ZT_FAULT=exit:rank=1:step=6 " + std::string(ZT_MPIRUN) + " -np 2 -x ZT_FAULT " + train, 120);
  EXPECT_NE(k1.code, 0) << k1.out;
  const std::string want =
      "zerotrain: error: [fault] ZT_FAULT rank=1 step=6 never fires: step K+1 is the final save, which rank 0 alone "
      "writes\n";
  EXPECT_EQ(count_of(k1.out, want), 1) << k1.out;
  EXPECT_FALSE(fs::exists(d + "/run/model.safetensors"));
  // The last step's save and a multiple of every_steps do fire.
  for (const char* spec : {"exit:rank=0:step=5:at=save", "exit:rank=0:step=4:at=save"}) {
    Result r = run(std::string("ZT_FAULT=") + spec + " " + train + " checkpoint.every_steps=2");
    EXPECT_EQ(r.code, 3) << spec << ": " << r.out;
  }
}

// Issue 15 (c): a value past fp32's range named no key (the optimizer saw it as inf).
TEST(HostileCli, AnLrBeyondFp32NamesTheKeyAndTheRange) {
  const std::string want = "'optimizer.params.lr' must be a number in (0, 3.4e+38], got 1e+300\n";
  Result o = run(kBin + " estimate" + kConfig + " --world 1 optimizer.params.lr=1e300");
  EXPECT_EQ(o.code, 1) << o.out;
  EXPECT_EQ(o.out, "zerotrain: error: [config] configs/mnist_mlp.json (with overrides): " + want);
  const std::string d = tmpdir("lr");
  nlohmann::json j = read_json(std::string(ZT_SOURCE_DIR) + "/configs/mnist_mlp.json");
  j["optimizer"]["params"]["lr"] = 1e300;
  write_file(d + "/lr.json", j.dump());
  Result f = run(kBin + " train --config " + d + "/lr.json run.dir=" + d + "/run");
  EXPECT_EQ(f.code, 1) << f.out;
  EXPECT_EQ(f.out, "zerotrain: error: [config] " + d + "/lr.json (with overrides): " + want);
  EXPECT_FALSE(fs::exists(d + "/run"));
}

// Issue 15 (d): nlohmann stops at a NUL byte and keeps the last of two equal keys, silently.
TEST(HostileCli, ConfigBytesAfterANulAndDuplicateKeysAreErrorsSayingWhere) {
  const std::string d = tmpdir("nul");
  const std::string text = slurp(std::string(ZT_SOURCE_DIR) + "/configs/mnist_mlp.json");
  write_file(d + "/nul.json", text + std::string(1, '\0') + "{\"seed\": 1}");
  Result nul = run(kBin + " train --config " + d + "/nul.json run.dir=" + d + "/run");
  EXPECT_EQ(nul.code, 1) << nul.out;
  const int lines = count_lines(text);
  EXPECT_EQ(nul.out, "zerotrain: error: [config] " + d + "/nul.json: a NUL byte at byte offset " +
                         std::to_string(text.size()) + " (line " + std::to_string(lines + 1) +
                         ", column 1); a config file is JSON text\n");
  write_file(d + "/dup.json", R"({"optimizer": {"type": "AdamW", "params": {"lr": 0.1, "eps": 1e-8, "lr": 1e-3}}})");
  Result dup = run(kBin + " estimate --world 1 --config " + d + "/dup.json");
  EXPECT_EQ(dup.code, 1) << dup.out;
  EXPECT_EQ(dup.out, "zerotrain: error: [config] " + d +
                         "/dup.json: duplicate key 'lr' in object 'optimizer.params' (each key may appear once)\n");
  write_file(d + "/top.json", R"({"seed": 1, "model": {"hidden": [8]}, "seed": 2})");
  Result top = run(kBin + " train --config " + d + "/top.json run.dir=" + d + "/run");
  EXPECT_EQ(top.code, 1) << top.out;
  EXPECT_EQ(top.out, "zerotrain: error: [config] " + d +
                         "/top.json: duplicate key 'seed' in the top-level object (each key may appear once)\n");
  Result over = run(kBin + " estimate" + kConfig + " --world 1 'model={\"hidden\": [4], \"hidden\": [8]}'");
  EXPECT_EQ(over.code, 1) << over.out;
  EXPECT_EQ(over.out,
            "zerotrain: error: [config] override 'model={\"hidden\": [4], \"hidden\": [8]}': duplicate key 'hidden' "
            "in object 'model' (each key may appear once)\n");
  EXPECT_FALSE(fs::exists(d + "/run"));
}

// The one "zerotrain: error:" line of an output.
std::string error_line(const std::string& out) {
  const size_t at = out.find("zerotrain: error:");
  return at == std::string::npos ? "(none in: " + out + ")" : out.substr(at, out.find('\n', at) - at);
}

// Issue 15 (e): estimate checks what train checks before reading data (the batch rule, the
// scheduler's params, the memory budget), with the same functions and so the same line.
TEST(HostileCli, EstimateAndTrainRejectTheSameSettingsWithTheSameLine) {
  if (!have_mnist()) GTEST_SKIP() << "MNIST not installed (scripts/setup.sh)";
  const std::string d = tmpdir("same");
  const std::pair<std::string, std::string> cases[] = {
      {" train_micro_batch_size_per_gpu=3",
       "[config] train_batch_size 64 != train_micro_batch_size_per_gpu 3 * gradient_accumulation_steps 1 * world "
       "size 1"},
      {" scheduler.params.warmup_num_steps=0", "'warmup_num_steps'"},
      {" scheduler.params.warmup_steps=10", "'warmup_steps'"},
      {" run.memory_budget_mb=1e18", "'run.memory_budget_mb' must be an integer in 0..8796093022207"}};
  for (const auto& [bad, want] : cases) {
    Result e = run(kBin + " estimate" + kConfig + " --world 1" + bad);
    Result t = run(kBin + " train" + kConfig + kSmall + bad + " run.dir=" + d + "/run");
    EXPECT_EQ(e.code, 1) << bad << ": " << e.out;
    EXPECT_EQ(t.code, 1) << bad << ": " << t.out;
    EXPECT_EQ(count_lines(e.out), 1) << e.out;
    EXPECT_EQ(count_lines(t.out), 1) << t.out;
    EXPECT_NE(error_line(e.out).find(want), std::string::npos) << bad << ": " << e.out;
    EXPECT_EQ(error_line(e.out), error_line(t.out)) << bad;
    EXPECT_FALSE(fs::exists(d + "/run/model.safetensors"));
  }
}

// A token shard in llm.c's format: 256 int32 header (magic, version, count), uint16 tokens.
void write_shard(const std::string& path, int64_t n) {
  std::vector<int32_t> header(256, 0);
  header[0] = 20240520, header[1] = 1, header[2] = int32_t(n);
  std::vector<uint16_t> tokens(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) tokens[size_t(i)] = uint16_t(110 + i % 17);
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(header.data()), 1024);
  f.write(reinterpret_cast<const char*>(tokens.data()), std::streamsize(2 * n));
}

// A BERT masked-LM run on `val_windows` validation sequences of 14 tokens (16 with [CLS], [SEP]).
std::string mlm_run(const std::string& d, int64_t val_windows, const std::string& extra) {
  fs::create_directories(d + "/tok");
  write_shard(d + "/tok/train_000000.bin", 14 * 8 + 1);
  write_shard(d + "/tok/val_000000.bin", 14 * val_windows + 1);
  return kBin +
         " train --config configs/bert_pretrain.json model.n_layer=1 model.n_embd=8 model.n_head=2 "
         "model.block_size=16 model.vocab_size=128 model.dropout=0 bf16.enabled=false data.seq_len=16 "
         "train_batch_size=2 train_micro_batch_size_per_gpu=2 run.max_steps=2 run.threads=1 data.dir=" +
         d + "/tok run.dir=" + d + "/run" + extra;
}

// Issue 15 (a): a validation that scores no token divided 0 by 0 and printed a NaN loss, exit 0.
TEST(HostileCli, AMaskedLmValidationThatScoresNoTokenIsNeverANanLoss) {
  const std::string d = tmpdir("mlm");
  Result r = run(mlm_run(d, 3, " data.mask_prob=1e-9"));
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_EQ(r.out, "zerotrain: error: [data] masked LM: none of the 3 validation sequences in " + d +
                       "/tok/val_*.bin has a masked token at data.mask_prob 1e-09, so the validation loss is "
                       "undefined (raise data.mask_prob or hold out more tokens)\n");
  EXPECT_FALSE(fs::exists(d + "/run/model.safetensors"));
  // A periodic pass over a few windows (here 2 of 300) may mask nothing: said, never a number.
  Result p = run(mlm_run(d, 300, " data.mask_prob=0.01 data.eval_every=1 data.eval_batches=1"));
  EXPECT_EQ(p.code, 0) << p.out;
  EXPECT_TRUE(has(p, "step 1: validation masked-LM loss: undefined (none of the 2 windows has a masked token)"))
      << p.out;
  EXPECT_FALSE(has(p, "nan")) << p.out;
  EXPECT_TRUE(has(p, "validation masked-LM loss: ")) << p.out;  // the final pass, over all 300
}

// A backend `train` cannot use under `mpirun -np 2` is one config error before any group forms,
// said once (rank 0 says it for both), and no run folder is made.
void expect_backend_refused_once(const std::string& backend, const std::string& want) {
  SCOPED_TRACE(backend);
  const std::string d = tmpdir("backend_" + backend);
  Result r = run(std::string(ZT_MPIRUN) + " -np 2 " + kBin + " train" + kConfig + kSmall +
                 " run.comm_backend=" + backend + " run.max_steps=2 run.dir=" + d + "/run");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find(want), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find(want), r.out.rfind(want)) << r.out;
  EXPECT_FALSE(fs::exists(d + "/run"));
}

TEST(HostileCli, LocalBackendUnderMpirunIsAConfigErrorSaidOnce) {
  expect_backend_refused_once(
      "local", "zerotrain: error: [config] run.comm_backend = local under mpirun with 2 ranks would run");
}

// Note [backend choice]: nccl where it cannot run (here: no CUDA; on a GPU build, run.device cpu
// or ranks sharing a GPU).
TEST(HostileCli, NcclItCannotServeIsAConfigErrorSaidOnce) {
  expect_backend_refused_once("nccl", "zerotrain: error: [config] run.comm_backend=nccl: this build has no CUDA");
}

}  // namespace

namespace {

// Note [background save]: a snapshot of states that live in swap files would hold them in memory:
// asked for, that is one line; left to auto, the run saves in the foreground and says why.
TEST(HostileCli, BackgroundCheckpointsOfSwappedStatesAreOneLineOrTheForeground) {
  const std::string d = tmpdir("async_swap");
  const std::string run_cfg = kBin + " train" + kConfig + kSmall + " run.max_steps=2 checkpoint.every_steps=1" +
                              " 'zero_optimization.offload_optimizer={\"device\": \"nvme\", \"nvme_path\": \"" + d +
                              "/swap\"}' run.dir=" + d + "/run";
  Result asked = run(run_cfg + " checkpoint.async=true");
  EXPECT_EQ(asked.code, 1) << asked.out;
  EXPECT_EQ(asked.out,
            "zerotrain: error: [config] checkpoint.async=true: the states are in swap files (a snapshot would hold "
            "them in memory); set checkpoint.async to false or auto\n");
  EXPECT_FALSE(fs::exists(d + "/run/checkpoints/latest"));
  Result auto_ = run(run_cfg);
  EXPECT_EQ(auto_.code, 0) << auto_.out;
  EXPECT_TRUE(has(auto_, "zerotrain: checkpoints in the foreground: the states are in swap files")) << auto_.out;
  EXPECT_TRUE(has(auto_, "2 steps, checkpoints every 1 in the foreground")) << auto_.out;
}

}  // namespace
