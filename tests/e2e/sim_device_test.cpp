// The engine on a device (issue 28), proven on the sim device (Note [sim device]): `zerotrain
// train` with run.device=sim follows the run.device=cpu run of the same config bit for bit (the
// same kernels run, the host never touches device memory) at every stage, at N = 1, 2 and 4, for
// the MLP, the CNN and GPT, in fp32, bf16 and fp16, with gradient accumulation and clipping; a
// checkpoint saved on sim resumes on cpu at another world size and the reverse; eval and generate
// print on sim what they print on cpu; and what is not available on a device yet is one line.
#include <gtest/gtest.h>

#include <map>
#include <sstream>

#include "e2e_util.h"

using namespace zt::e2e;

namespace {

const std::string kBin = zt::testing::shell_word(ZT_BIN);
const std::string kMpi = std::string(ZT_MPIRUN) + " -np ";

struct Case {
  std::string name, args;  // a label, and the config with its overrides
  int np;
  std::vector<int> stages;
  int node_ranks = 0;     // > 0: ZT_COMM_NODE_RANKS, so ZeRO++ sees nodes of that many ranks
  std::string sim_only = "";  // overrides of the sim run alone (ZeRO-Offload: the cpu run keeps it all in memory)
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.name << " np " << c.np; }

// 16-bit runs pin their product path: cpu and sim runs each choose it, and auto times (Note [16-bit products]).
const std::string kMnist = " --config configs/mnist_mlp.json data.train_limit=2048 run.eval_at_end=false"
                           " steps_per_print=1 run.max_steps=8 run.bf16_products=native";
const std::string kCnn = " --config configs/cnn_fashion.json data.train_limit=512 run.eval_at_end=false"
                         " steps_per_print=1 run.max_steps=3 train_batch_size=32 model.channels=[8,16]"
                         " model.fc=[32] run.bf16_products=native";
// GPT on random tokens written by the test (the real ones need the setup's data).
const std::string kGpt = " --config configs/gpt_sotu.json model.n_layer=2 model.n_embd=64 model.n_head=2"
                         " model.block_size=32 train_batch_size=8 data.eval_every=0 run.eval_at_end=false"
                         " steps_per_print=1 run.max_steps=4 run.bf16_products=native";

// A Llama (GQA, 2 key/value heads for 4 heads) the same way: its ops on the device.
const std::string kLlama = " --config configs/llama_sotu.json model.n_layer=2 model.n_embd=64 model.n_head=4"
                           " model.n_kv_head=2 model.intermediate_size=96 model.block_size=32 train_batch_size=8"
                           " data.eval_every=0 run.eval_at_end=false steps_per_print=1 run.max_steps=4"
                           " run.bf16_products=native";

const std::string kZeroPP = " zero_optimization.zero_quantized_weights=true"
                            " zero_optimization.zero_quantized_gradients=true zero_optimization.zero_hpz_partition_size=2";

const std::string kInt8Grads =
    " zero_optimization.zero_quantized_gradients=true zero_optimization.zero_quantized_gradients_bits=8";

const std::string kOffload = " zero_optimization.offload_optimizer.device=cpu";
const std::string kSuper = " zero_optimization.offload_optimizer.super_offload=true";
const std::string kNvme = " zero_optimization.offload_optimizer.device=nvme zero_optimization.offload_optimizer.nvme_path=" +
                          (std::filesystem::temp_directory_path() / "zt_e2e_sim_swap").string();

// A 16-bit run without 16-bit kernels says so in its start line (Note [f32 compute]).
bool computes_in_f32(const std::string& out) { return out.find("computing in f32") != std::string::npos; }

class SimFollowsCpu : public ::testing::TestWithParam<Case> {};

TEST_P(SimFollowsCpu, BitForBit) {
  const Case c = GetParam();
  const bool gpt = c.args.find("gpt_sotu") != std::string::npos || c.args.find("llama_sotu") != std::string::npos;
  if (!gpt && !have_mnist()) GTEST_SKIP() << "MNIST and Fashion-MNIST not installed (scripts/setup.sh)";
  const std::string root = tmpdir("sim_" + c.name + "_" + std::to_string(c.np));
  std::string args = c.args;
  if (gpt) {
    write_random_tokens(root + "/tok", 20000, 2000);
    args += " data.dir=" + root + "/tok";
  }
  for (int stage : c.stages) {
    SCOPED_TRACE("stage " + std::to_string(stage));
    std::map<std::string, std::string> weights;
    std::map<std::string, std::map<int64_t, double>> logged;
    for (const std::string device : {"cpu", "sim"}) {
      const std::string dir = root + "/" + device + std::to_string(stage);
      const std::string mpi = c.node_ranks > 0 ? "env ZT_COMM_NODE_RANKS=" + std::to_string(c.node_ranks) + " " +
                                                     std::string(ZT_MPIRUN) + " -x ZT_COMM_NODE_RANKS -np "
                                               : kMpi;
      const Result r = run(mpi + std::to_string(c.np) + " " + kBin + " train" + args + " zero_optimization.stage=" +
                               std::to_string(stage) + " run.device=" + device + " run.dir=" + dir +
                               (device == "sim" ? c.sim_only : ""),
                           300);
      ASSERT_EQ(r.code, 0) << r.out;
      weights[device] = slurp(dir + "/model.safetensors");
      logged[device] = logged_losses(dir);
      if (device == "sim") {  // the model states live on the device: the host holds none of them
        EXPECT_NE(r.out.find("on sim:0 (the simulated GPU)"), std::string::npos) << r.out;
        const auto recs = read_jsonl(dir + "/metrics.jsonl");
        const auto& last = recs.at(recs.size() - 2);  // the last step's record (the final event follows)
        EXPECT_EQ(last.at("device"), "sim:0");
        const bool offload = !c.sim_only.empty();  // Note [host residence]: the states off the device
        const bool pinned = c.sim_only.find("offload_param.device=cpu") != std::string::npos;
        const bool on_disk = c.sim_only.find("offload_param.device=nvme") != std::string::npos;
        if (!on_disk) {  // the shards on the device, or pinned on the host
          EXPECT_GT(last.at(pinned ? "pinned_memory" : "device_memory").at("param").get<int64_t>(), 0);
        }
        EXPECT_EQ(last.at("device_memory").at("optim").get<int64_t>() > 0, !offload);
        EXPECT_EQ(last.at("pinned_memory").at("optim").get<int64_t>() > 0, offload);  // states or staging tiles
        if (offload) {
          EXPECT_EQ(last.at("device_memory").at("master").get<int64_t>(), 0);
        }
        if (c.sim_only.find(kOffload) == 0) {  // Note [host update overlap]: behind backward, speculated where scaled
          const bool clips = gpt ? c.args.find("gradient_clipping=0 ") == std::string::npos
                                 : c.args.find("gradient_clipping=") != std::string::npos;
          const bool scaled = clips || c.args.find("fp16") != std::string::npos;
          const bool behind = !scaled || c.sim_only.find("super_offload=true") != std::string::npos;
          EXPECT_NE(r.out.find(behind ? "updated by the host behind backward" : "updated by the host after backward"),
                    std::string::npos)
              << r.out;
          const auto& o = last.at("offload");
          EXPECT_EQ(o.at("early_updates").get<int64_t>() > 0, behind);
          const int64_t redone = o.at("early_redone").get<int64_t>();
          if (!scaled || c.name.find("kept") != std::string::npos) {
            EXPECT_EQ(redone, 0);
          }
          if (c.name.find("redo") != std::string::npos) {
            EXPECT_GT(redone, 0);
          }
        }
        EXPECT_EQ(last.at("memory").at("param").get<int64_t>(), 0);
        const bool swap = c.sim_only.find("nvme") != std::string::npos;  // its tile buffers are host memory
        EXPECT_EQ(last.at("memory").at("optim").get<int64_t>() > 0, swap);
      }
    }
    EXPECT_FALSE(logged["cpu"].empty());
    EXPECT_EQ(logged["sim"], logged["cpu"]);
    EXPECT_TRUE(weights["sim"] == weights["cpu"]) << "the final weights differ";
  }
}

INSTANTIATE_TEST_SUITE_P(
    Train, SimFollowsCpu,
    ::testing::Values(Case{"mlp_fp32", kMnist, 1, {0, 1, 2, 3}}, Case{"mlp_fp32", kMnist, 2, {0, 1, 2, 3}},
                      Case{"mlp_fp16_accumulation", kMnist + " fp16.enabled=true gradient_accumulation_steps=2 data.train_limit=320", 2,
                           {1, 3}},
                      Case{"mlp_bf16_clipped", kMnist + " bf16.enabled=true gradient_clipping=0.5", 4, {2, 3}},
                      Case{"cnn_bf16", kCnn + " bf16.enabled=true", 2, {0, 3}},
                      // Stages 1-2 of GPT on the device: the ZeRO++, sparse-row and offload cases below.
                      Case{"gpt_bf16", kGpt + " train_micro_batch_size_per_gpu=2", 2, {0, 3}},
                      // ZeRO++ over two nodes of two ranks: qwZ's int8 weights, qgZ's int4 gradients, hpZ;
                      // and the position embedding's sparse rows (the kernels of zt/ops/compress.h).
                      Case{"gpt_zeropp", kGpt + " train_micro_batch_size_per_gpu=2" + kZeroPP, 4, {3}, 2},
                      Case{"gpt_int8_gradients", kGpt + " train_micro_batch_size_per_gpu=2" + kInt8Grads, 4, {1, 2}, 2},
                      Case{"gpt_sparse_rows", kGpt + " train_micro_batch_size_per_gpu=2 sparse_gradients=true", 2, {1, 2}},
                      // The Llama family: every stage in bf16; its untied embedding's sparse rows; offloaded.
                      Case{"llama_bf16", kLlama + " train_micro_batch_size_per_gpu=2", 2, {0, 1, 2, 3}},
                      Case{"llama_untied_sparse_rows",
                           kLlama + " train_micro_batch_size_per_gpu=2 model.tie_word_embeddings=false sparse_gradients=true",
                           2, {1, 2}},
                      Case{"llama_offload_fp32", kLlama + " bf16.enabled=false train_micro_batch_size_per_gpu=2", 2, {3}, 0,
                           kOffload},
                      // ZeRO-Offload on the device (Note [host residence]) against the in-memory cpu run.
                      Case{"mlp_offload_fp32", kMnist, 2, {1, 2, 3}, 0, kOffload},
                      Case{"mlp_offload_bf16", kMnist + " bf16.enabled=true", 1, {1, 3}, 0, kOffload},
                      // Note [host update overlap]'s speculation: never clipped (kept), always clipped
                      // (redone: bf16 at stage 2, fp32 with stage 3's shards in host memory), an fp16
                      // overflow (undone).
                      Case{"mlp_offload_speculation_kept", kMnist + " bf16.enabled=true gradient_clipping=1000000", 2,
                           {2}, 0, kOffload + kSuper},
                      Case{"mlp_offload_bf16_clipped_redo",
                           kMnist + " bf16.enabled=true gradient_clipping=0.000001 zero_optimization.reduce_bucket_size=60000",
                           2, {2}, 0, kOffload + kSuper},  // four buckets
                      Case{"mlp_offload_clipped_redo", kMnist + " gradient_clipping=0.000001", 2, {3}, 0,
                           kOffload + kSuper + " zero_optimization.offload_param.device=cpu"
                                      " zero_optimization.stage3_param_persistence_threshold=0"},
                      Case{"mlp_offload_fp16_overflow_redo", kMnist + " fp16.enabled=true fp16.initial_scale_power=24", 2,
                           {1}, 0, kOffload + kSuper},
                      Case{"gpt_offload_bf16", kGpt + " train_micro_batch_size_per_gpu=2 gradient_clipping=0 ", 2, {1, 2, 3}, 0,
                           kOffload + " zero_optimization.sub_group_size=3000"},
                      // ZeRO-Infinity's optimizer on the device: swap files, each tile staged down and up.
                      Case{"mlp_nvme_bf16", kMnist + " bf16.enabled=true", 2, {1, 3}, 0, kNvme},
                      Case{"gpt_nvme_fp32", kGpt + " train_micro_batch_size_per_gpu=2", 2, {2}, 0,
                           kNvme + " zero_optimization.sub_group_size=3000"},
                      // Stage 3's parameter shards in pinned host memory too, with qwZ's int8 gathers.
                      Case{"mlp_both_offloaded_bf16", kMnist + " bf16.enabled=true", 2, {3}, 0,
                           kOffload + " zero_optimization.offload_param.device=cpu"
                                      " zero_optimization.stage3_param_persistence_threshold=0"},
                      // ZeRO-Infinity on the device: the optimizer's and the parameters' swap files.
                      Case{"mlp_both_nvme_bf16", kMnist + " bf16.enabled=true", 2, {3}, 0,
                           kNvme + " zero_optimization.offload_param.device=nvme"
                                   " zero_optimization.stage3_param_persistence_threshold=0"
                                   " zero_optimization.offload_param.nvme_path=" +
                               (std::filesystem::temp_directory_path() / "zt_e2e_sim_swap").string()},
                      Case{"gpt_both_offloaded_fp32",
                           kGpt + " train_micro_batch_size_per_gpu=2 zero_optimization.zero_quantized_weights=true", 2,
                           {3}, 0, kOffload + " zero_optimization.offload_param.device=cpu"}),
    [](const auto& info) { return info.param.name + "_np" + std::to_string(info.param.np); });

// A checkpoint saved on sim at N = 2 resumes on cpu at N = 3 and its next one on sim at N = 1,
// following the run that never stopped (another world size: within fp32 reduction order).
TEST(SimCheckpoint, SavedOnSimResumesOnCpuAndBackAtOtherWorldSizes) {
  if (!have_mnist()) GTEST_SKIP() << "MNIST not installed (scripts/setup.sh)";
  const std::string root = tmpdir("sim_ckpt"), whole = root + "/whole", parts = root + "/parts";
  const std::string args = " --config configs/mnist_mlp.json data.train_limit=6400 run.eval_at_end=false"
                           " steps_per_print=5 train_batch_size=48 zero_optimization.stage=2"
                           " scheduler.params.total_num_steps=30 checkpoint.dir=" + parts + "/ckpt";
  auto train = [&](int np, const std::string& device, const std::string& dir, const std::string& more) {
    return run(kMpi + std::to_string(np) + " " + kBin + " train" + args + " run.device=" + device + " run.dir=" + dir +
                   more,
               300);
  };
  Result a = train(2, "cpu", whole, " run.max_steps=30");
  ASSERT_EQ(a.code, 0) << a.out;
  Result b = train(2, "sim", parts, " run.max_steps=10 checkpoint.every_steps=10");
  ASSERT_EQ(b.code, 0) << b.out;
  Result c = train(3, "cpu", parts, " run.max_steps=20 checkpoint.every_steps=10 run.resume=latest");
  ASSERT_EQ(c.code, 0) << c.out;
  Result d = train(1, "sim", parts, " run.max_steps=30 run.resume=latest");
  ASSERT_EQ(d.code, 0) << d.out;
  EXPECT_NE(d.out.find("resumed from"), std::string::npos) << d.out;
  const auto want = logged_losses(whole), got = logged_losses(parts);
  for (int64_t step : {5, 10, 15, 20, 25, 30}) {
    ASSERT_TRUE(got.count(step) && want.count(step)) << step << ": " << d.out;
    if (step <= 10)
      EXPECT_EQ(got.at(step), want.at(step)) << step;  // sim at N = 2 is the cpu run at N = 2
    else
      EXPECT_NEAR(got.at(step), want.at(step), 1e-4 * std::max(1.0, want.at(step))) << step;
  }
}

// eval and generate put the model on run.device too: on sim they print what they print on cpu.
// The parameter-server strategy on sim (every rank's buffers on the device, pushes and pulls
// staged through the host) follows its cpu run bit for bit: fp32 with one server, bf16 with
// gradient accumulation and two servers.
TEST(SimParameterServer, FollowsTheCpuRunBitForBit) {
  if (!have_mnist()) GTEST_SKIP() << "MNIST not installed (scripts/setup.sh)";
  struct PsCase {
    int np, servers;
    std::string more;
  };
  for (const PsCase& c : {PsCase{3, 1, ""}, PsCase{4, 2, " bf16.enabled=true gradient_accumulation_steps=2"}}) {
    SCOPED_TRACE(std::to_string(c.servers) + " servers of " + std::to_string(c.np) + " ranks" + c.more);
    const std::string root = tmpdir("sim_ps_" + std::to_string(c.np));
    std::map<std::string, std::map<int64_t, double>> logged;
    std::map<std::string, std::string> weights;
    for (const std::string device : {"cpu", "sim"}) {
      const std::string dir = root + "/" + device;
      const Result r = run(kMpi + std::to_string(c.np) + " " + kBin + " train" + kMnist + c.more +
                               " run.strategy=parameter_server run.parameter_servers=" + std::to_string(c.servers) +
                               " run.device=" + device + " run.dir=" + dir,
                           300);
      ASSERT_EQ(r.code, 0) << r.out;
      if (device == "sim") {
        EXPECT_NE(r.out.find("every rank's buffers on sim:0"), std::string::npos) << r.out;
      }
      logged[device] = logged_losses(dir);
      weights[device] = slurp(dir + "/model.safetensors");
    }
    EXPECT_FALSE(logged["cpu"].empty());
    EXPECT_EQ(logged["sim"], logged["cpu"]);
    EXPECT_TRUE(weights["sim"] == weights["cpu"]) << "the final weights differ";
  }
}

// ZeRO-Offload's checkpoints (Note [host residence]): saved offloaded, resumed in memory, saved
// again and resumed offloaded, at N = 2 in bf16 (a master), the run that never stopped bit for bit.
TEST(SimCheckpoint, OffloadedAndInMemoryResumeEachOtherBitForBit) {
  if (!have_mnist()) GTEST_SKIP() << "MNIST not installed (scripts/setup.sh)";
  const std::string root = tmpdir("sim_offload_ckpt"), whole = root + "/whole", parts = root + "/parts";
  const std::string args = " --config configs/mnist_mlp.json data.train_limit=6400 run.eval_at_end=false"
                           " steps_per_print=5 train_batch_size=48 zero_optimization.stage=3 bf16.enabled=true"
                           " run.device=sim scheduler.params.total_num_steps=30 checkpoint.dir=" + parts + "/ckpt";
  auto train = [&](const std::string& dir, const std::string& more) {
    return run(kMpi + "2 " + kBin + " train" + args + " run.dir=" + dir + more, 300);
  };
  Result a = train(whole, " run.max_steps=30");
  ASSERT_EQ(a.code, 0) << a.out;
  Result b = train(parts, kOffload + " run.max_steps=10 checkpoint.every_steps=10");
  ASSERT_EQ(b.code, 0) << b.out;
  Result c = train(parts, " run.max_steps=20 checkpoint.every_steps=10 run.resume=latest");
  ASSERT_EQ(c.code, 0) << c.out;
  Result d = train(parts, kOffload + " run.max_steps=30 run.resume=latest");
  ASSERT_EQ(d.code, 0) << d.out;
  EXPECT_NE(d.out.find("resumed from"), std::string::npos) << d.out;
  const auto want = logged_losses(whole), got = logged_losses(parts);
  for (int64_t step : {5, 10, 15, 20, 25, 30}) {
    ASSERT_TRUE(got.count(step) && want.count(step)) << step << ": " << d.out;
    EXPECT_EQ(got.at(step), want.at(step)) << step;
  }
  EXPECT_TRUE(slurp(whole + "/model.safetensors") == slurp(parts + "/model.safetensors")) << "the final weights differ";
}

// ZeRO-Offload's bytes (Note [host residence]): at rest the device holds exactly what `estimate`
// puts on it and pinned host memory exactly the master, states and staging tiles; the device's
// peak stays within the predicted peak.
TEST(SimOffloadMemory, DeviceAndPinnedHostHoldWhatEstimateSays) {
  if (!have_mnist()) GTEST_SKIP() << "MNIST not installed (scripts/setup.sh)";
  const std::string args = " --config configs/mnist_mlp.json data.train_limit=2048 run.eval_at_end=false"
                           " steps_per_print=1 run.max_steps=4 bf16.enabled=true run.device=sim";
  // Note [host update overlap]'s speculation keeps a pinned snapshot of the states; with two
  // micro-batches a step the gradient shard accumulates on the device (Note [host gradient shard]).
  const std::vector<std::pair<int, std::string>> runs = {
      {1, ""}, {2, ""}, {3, ""}, {2, kSuper + " gradient_clipping=1"}, {2, " gradient_accumulation_steps=2"}};
  int64_t pinned_without = 0;
  for (const auto& [stage, extra] : runs) {
    SCOPED_TRACE("stage " + std::to_string(stage) + extra);
    const std::string s = " zero_optimization.stage=" + std::to_string(stage) + extra,
                      dir = tmpdir("sim_offload_memory");
    const Result e = run(kBin + " estimate" + args + s + " --world 2 --json", 60);
    ASSERT_EQ(e.code, 0) << e.out;
    const auto row = nlohmann::json::parse(e.out.substr(e.out.find('{'))).at("stages").at(size_t(stage));
    const auto& want = row.at("offload_optimizer_cpu");
    const Result r = run(kMpi + "2 " + kBin + " train" + args + s + kOffload + " run.dir=" + dir, 300);
    ASSERT_EQ(r.code, 0) << r.out;
    const auto recs = read_jsonl(dir + "/metrics.jsonl");
    const auto& last = recs.at(recs.size() - 2);
    auto states = [&](const char* field) {
      const auto& m = last.at(field);
      int64_t n = 0;
      for (const char* tag : {"param", "grad", "master", "optim"}) n += m.at(tag).get<int64_t>();
      return n;
    };
    EXPECT_EQ(states("device_memory"), want.at("device").get<int64_t>());
    EXPECT_EQ(states("pinned_memory"), want.at("host").get<int64_t>());
    if (stage == 2 && extra.empty()) pinned_without = states("pinned_memory");
    const bool accumulates = extra.find("gradient_accumulation_steps") != std::string::npos;
    if (stage >= 2) {  // one micro-batch a step: the reduced gradient goes down, none stays on the device
      EXPECT_EQ(last.at("device_memory").at("grad").get<int64_t>() == 0, !accumulates);
    }
    if (!extra.empty() && !accumulates) {
      EXPECT_GT(states("pinned_memory"), pinned_without);
      EXPECT_GT(last.at("offload").at("early_updates").get<int64_t>(), 0);
    }
    EXPECT_EQ(last.at("device_memory").at("optim").get<int64_t>(), 0);
    EXPECT_LE(last.at("device_memory").at("peak").get<int64_t>(), want.at("peak").at("in_use").get<int64_t>());
    // Note [batch prefetch]: the next micro-batch is on the device during this one's forward.
    EXPECT_LE(last.at("device_memory_peak").at("activation").get<int64_t>(),
              want.at("peak").at("activations").get<int64_t>());
  }
}

// The mutation checks: with the waits of copies to the host dropped (ZT_SIM_MUTATE=drop_sync), or
// the compute stream's wait for a batch sent up on the copy stream (drop_copy_wait, Note [copy
// stream]), the sim run no longer follows the cpu run; the same test without them does
// (SimFollowsCpu). The second runs with gradient accumulation: prefetches within a step and across.
void expect_mutation_fails_the_trajectory(const std::string& mode, const std::string& extra) {
  if (!have_mnist()) GTEST_SKIP() << "MNIST not installed (scripts/setup.sh)";
  const std::string root = tmpdir("sim_mutation_" + mode);
  std::map<std::string, std::map<int64_t, double>> logged;
  for (const std::string device : {"cpu", "sim"}) {
    const std::string dir = root + "/" + device;
    const Result r = run("env ZT_SIM_MUTATE=" + mode + " " + kMpi + "2 " + kBin + " train" + kMnist + extra +
                             " zero_optimization.stage=2 run.device=" + device + " run.dir=" + dir,
                         300);
    if (device == "cpu") {
      ASSERT_EQ(r.code, 0) << r.out;  // the hook touches only the sim device
    }
    logged[device] = r.code == 0 ? logged_losses(dir) : std::map<int64_t, double>{};
  }
  EXPECT_FALSE(logged["cpu"].empty());
  EXPECT_NE(logged["sim"], logged["cpu"]) << "the sim device let a missing synchronisation pass (" << mode << ")";
}

TEST(SimMutation, ADroppedSynchronisationFailsTheTrajectory) { expect_mutation_fails_the_trajectory("drop_sync", ""); }

TEST(SimMutation, ADroppedWaitForTheNextBatchFailsTheTrajectory) {
  expect_mutation_fails_the_trajectory("drop_copy_wait", " gradient_accumulation_steps=2");
}

// `estimate` plans a GPU run on a machine without one: the same rows as for sim, naming cuda.
TEST(SimOffloadMemory, EstimatePlansACudaRunWhereNoGpuIs) {
  const std::string args = " --config configs/mnist_mlp.json bf16.enabled=true --world 2 --json";
  const Result sim = run(kBin + " estimate" + args + " run.device=sim", 60);
  const Result cuda = run(kBin + " estimate" + args + " run.device=cuda", 60);
  ASSERT_EQ(sim.code, 0) << sim.out;
  ASSERT_EQ(cuda.code, 0) << cuda.out;
  const auto s = nlohmann::json::parse(sim.out.substr(sim.out.find('{')));
  const auto c = nlohmann::json::parse(cuda.out.substr(cuda.out.find('{')));
  EXPECT_EQ(c.at("device").get<std::string>().rfind("cuda", 0), 0u) << c.at("device");
  EXPECT_EQ(c.at("stages"), s.at("stages"));  // placement asks only whether the states are off the host
}

// ZeRO-Infinity's promise on a device (issue 29): a GPT whose model states (16 bytes a parameter:
// bf16 parameters and gradients, fp32 master and Adam) are 8x run.device_memory_mb trains at
// stage 3, N = 2, with the optimizer and the parameter shards in pinned host memory, within the
// cap (the device's allocator refuses past it), follows the in-memory cpu run bit for bit, and the
// host's OS peak is within 10% of the plan.
// A GPT of 9,551,360 parameters (12 blocks of 786,432, a 256-token vocabulary) on random tokens
// written under `root`, bf16, stage 3, activations checkpointed, one unit gathered at a time.
std::string deep_gpt(const std::string& root) {
  write_random_tokens(root + "/tok", 20000, 2000, 7, 256);
  return " --config configs/gpt_sotu.json model.vocab_size=256 model.n_layer=12 model.n_embd=256"
         " model.n_head=4 model.block_size=32 train_batch_size=4 train_micro_batch_size_per_gpu=2"
         " activation_checkpointing.number_checkpoints=12 data.eval_every=0 run.eval_at_end=false"
         " steps_per_print=1 run.max_steps=5 bf16.enabled=true run.bf16_products=native zero_optimization.stage=3"
         " zero_optimization.stage3_param_persistence_threshold=0 zero_optimization.stage3_max_reuse_distance=0"
         " zero_optimization.stage3_prefetch_bucket_size=800000 zero_optimization.stage3_max_live_parameters=1600000"
         " data.dir=" +
         root + "/tok";
}

TEST(SimOffload, StatesEightTimesTheDeviceCapTrainExactly) {
  const std::string root = tmpdir("sim_infinity"), gpt = deep_gpt(root);
  const std::string offload = kOffload + " zero_optimization.offload_param.device=cpu";
  const Result cpu = run(kMpi + "2 " + kBin + " train" + gpt + " run.device=cpu run.dir=" + root + "/cpu", 300);
  ASSERT_EQ(cpu.code, 0) << cpu.out;
  ASSERT_NE(cpu.out.find("9551360 parameters"), std::string::npos) << cpu.out;
  // Without bf16 kernels the sim, running the CPU's kernels, computes in f32 (Note [f32 compute]):
  // each gathered unit has its f32 copy and activations are f32, so the cap is 9x, not 16x, below
  // the states. With no gradient shard on the device (Note [host gradient shard]) both are over 8x.
  const bool f32 = computes_in_f32(cpu.out);
  const int64_t cap_mb = f32 ? 16 : 9, params = 9551360;
  ASSERT_GE(16 * params, (f32 ? 9 : 16) * (cap_mb << 20));
  const Result sim = run(kMpi + "2 " + kBin + " train" + gpt + offload + " run.device=sim run.device_memory_mb=" +
                             std::to_string(cap_mb) + " run.dir=" + root + "/sim",
                         300);
  ASSERT_EQ(sim.code, 0) << sim.out;
  EXPECT_NE(sim.out.find("offload_param: cpu, the parameter shards of"), std::string::npos) << sim.out;
  const auto recs = read_jsonl(root + "/sim/metrics.jsonl");
  const auto& last = recs.at(recs.size() - 2);
  EXPECT_LE(last.at("device_memory").at("peak").get<int64_t>(), cap_mb << 20);
  EXPECT_GT(last.at("pinned_memory").at("param").get<int64_t>(), 0);
  // Note [host plan]: the host's OS peak against the plan's host share (the process, the pinned
  // states and staging, the shm slots, the staged collectives' copies, the sim device's pages).
  const double predicted = double(recs.front().at("memory_plan").at("predicted_rss").get<int64_t>());
  const double rss = double(last.at("rss_peak").get<int64_t>());
  if (!kAsan) {
    EXPECT_NEAR(predicted / rss, 1.0, 0.10) << "predicted " << predicted << ", /proc " << rss;
  }
  EXPECT_EQ(logged_losses(root + "/sim"), logged_losses(root + "/cpu"));
  EXPECT_TRUE(slurp(root + "/sim/model.safetensors") == slurp(root + "/cpu/model.safetensors"));
}

// Note [device plan]: offload "auto" on a device takes the least offload whose predicted device
// peak fits run.device_memory_mb and whose host bytes fit run.memory_budget_mb, says so before
// step 1, and trains as configured so; budgets no plan meets are one line before step 1.
TEST(SimOffload, AutoTakesTheLeastOffloadThatFitsTheDeviceCap) {
  const std::string root = tmpdir("sim_device_plan"), gpt = deep_gpt(root);
  const std::string autos = " run.device=sim zero_optimization.offload_optimizer.device=auto"
                            " zero_optimization.offload_param.device=auto zero_optimization.offload_optimizer.nvme_path=" +
                            root + " zero_optimization.offload_param.nvme_path=" + root;
  auto train = [&](int cap_mb, const std::string& dir, const std::string& more = "") {
    return run(kMpi + "2 " + kBin + " train" + gpt + autos + " run.device_memory_mb=" + std::to_string(cap_mb) +
                   more + " run.dir=" + root + "/" + dir,
               300);
  };
  const Result roomy = train(200, "roomy");
  ASSERT_EQ(roomy.code, 0) << roomy.out;
  EXPECT_NE(roomy.out.find("on sim:0: offload_optimizer none, offload_param none: predicted device peak"),
            std::string::npos)
      << roomy.out;
  // Between the plan with the optimizer offloaded and the one with the parameters too (Note [f32
  // compute]: f32 copies and activations need more).
  const int tight_mb = computes_in_f32(roomy.out) ? 19 : 12;
  const Result tight = train(tight_mb, "tight");
  ASSERT_EQ(tight.code, 0) << tight.out;
  EXPECT_NE(tight.out.find("on sim:0: offload_optimizer cpu, offload_param cpu: predicted device peak"),
            std::string::npos)
      << tight.out;
  EXPECT_EQ(logged_losses(root + "/tight"), logged_losses(root + "/roomy"));
  // Note [placement choice]: the start record names the placement zero::place chose.
  const auto placed = read_jsonl(root + "/tight/metrics.jsonl").at(0).at("memory_plan").at("placement");
  EXPECT_EQ(placed, nlohmann::json({{"offload_optimizer", "cpu"}, {"offload_param", "cpu"}, {"lowered_limits", false}}));
  // `estimate` prints the plan `train` printed, line for line.
  const Result est = run(kBin + " estimate" + gpt + autos + " run.device_memory_mb=" + std::to_string(tight_mb) +
                             " --world 2",
                         120);
  ASSERT_EQ(est.code, 0) << est.out;
  const size_t at = tight.out.find("memory plan on sim:0");
  ASSERT_NE(at, std::string::npos) << tight.out;
  const std::string plan = tight.out.substr(at, tight.out.find('\n', at) - at);
  EXPECT_NE(est.out.find(plan + "\n"), std::string::npos) << plan << "\n" << est.out;
  // The host's budget too: the pinned states and gradient shards do not fit 40 MiB, the optimizer's
  // swap tiles (and the gradient shards) do.
  const Result host = train(tight_mb, "host", " run.memory_budget_mb=40");
  ASSERT_EQ(host.code, 0) << host.out;
  EXPECT_NE(host.out.find("on sim:0: offload_optimizer nvme, offload_param cpu: predicted device peak"),
            std::string::npos)
      << host.out;
  EXPECT_NE(host.out.find("fit run.memory_budget_mb 40.00MiB"), std::string::npos) << host.out;
  EXPECT_EQ(logged_losses(root + "/host"), logged_losses(root + "/roomy"));
  const Result small = train(tight_mb, "small", " run.memory_budget_mb=12");
  EXPECT_NE(small.code, 0);
  EXPECT_EQ(count_of(small.out, "zerotrain: error"), 1) << small.out;
  EXPECT_NE(small.out.find("run.memory_budget_mb=12 holds no plan that fits the device: the least the host needs is"),
            std::string::npos)
      << small.out;
  // Below every placement's peak at the configured limits, lowered ones (said) fit (probe 4, case 13).
  const Result lowered = train(8, "lowered");
  ASSERT_EQ(lowered.code, 0) << lowered.out;
  EXPECT_NE(lowered.out.find("offload_param cpu, one gradient bucket in flight and no stage-3 prefetch or reuse"),
            std::string::npos)
      << lowered.out;
  const auto low = read_jsonl(root + "/lowered/metrics.jsonl");  // the tied wte in rounds: its own roundings
  EXPECT_LE(low.at(low.size() - 2).at("device_memory").at("peak").get<int64_t>(), int64_t(8) << 20);
  const Result none = train(5, "none");
  EXPECT_NE(none.code, 0);
  EXPECT_EQ(count_of(none.out, "zerotrain: error"), 1) << none.out;  // rank 0's, beside mpirun's own words
  EXPECT_NE(none.out.find("run.device_memory_mb=5 (sim:0) fits no plan: the smallest predicted device peak is"),
            std::string::npos)
      << none.out;
  EXPECT_FALSE(std::filesystem::exists(root + "/none/metrics.jsonl") &&
               slurp(root + "/none/metrics.jsonl").find("\"step\"") != std::string::npos);
}

TEST(SimEvalAndGenerate, PrintWhatTheCpuPrints) {
  const std::string root = tmpdir("sim_eval");
  write_random_tokens(root + "/tok", 20000, 2000);
  const std::string args = kGpt + " data.dir=" + root + "/tok";
  const Result t = run(kBin + " train" + args + " run.dir=" + root + "/run", 300);
  ASSERT_EQ(t.code, 0) << t.out;
  std::map<std::string, std::string> printed;
  for (const std::string device : {"cpu", "sim"}) {
    const std::string w = " --weights " + root + "/run/model.safetensors run.device=" + device;
    const Result e = run(kBin + " eval" + args + w + " data.eval_batches=2", 120);
    const Result g = run(kBin + " generate" + args + w + " --tokens 8 --temperature 0 --prompt The", 120);
    ASSERT_EQ(e.code, 0) << e.out;
    ASSERT_EQ(g.code, 0) << g.out;
    std::istringstream lines(e.out + g.out);  // less the lines that time themselves
    for (std::string line; std::getline(lines, line);)
      if (line.find("tokens/s") == std::string::npos) printed[device] += line + "\n";
  }
  EXPECT_NE(printed["cpu"].find("validation loss"), std::string::npos) << printed["cpu"];
  EXPECT_EQ(printed["sim"], printed["cpu"]);
}

TEST(SimRefuses, WhatRunsOnTheHostOnlyTheCapAndABadDeviceAreOneLine) {
  const Result r = run(kBin + " train --config configs/mnist_mlp.json run.device=sim zero_optimization.stage=3" +
                           " zero_optimization.offload_param.device=nvme zero_optimization.offload_param.nvme_path=" +
                           tmpdir("sim_nvme"),
                       60);
  EXPECT_NE(r.code, 0);
  EXPECT_EQ(count_lines(r.out), 1) << r.out;
  EXPECT_NE(r.out.find("offload_param.device=nvme with run.device=sim:0 needs zero_optimization.offload_optimizer"),
            std::string::npos)
      << r.out;
  const Result par = run(kBin + " train --config configs/mnist_mlp.json run.device=sim zero_optimization.stage=3" +
                             " zero_optimization.offload_param.device=cpu",
                         60);
  EXPECT_NE(par.code, 0);
  EXPECT_EQ(count_lines(par.out), 1) << par.out;
  EXPECT_NE(par.out.find("offload_param.device=cpu with run.device=sim:0 needs zero_optimization.offload_optimizer"),
            std::string::npos)
      << par.out;
  const Result two = run(kBin + " train --config configs/mnist_mlp.json run.device=sim zero_optimization.stage=2" +
                             kOffload + " zero_optimization.offload_param.device=cpu",
                         60);  // Note [placement choice]: a configured placement is not dropped
  EXPECT_NE(two.code, 0);
  EXPECT_EQ(count_lines(two.out), 1) << two.out;
  EXPECT_NE(two.out.find("offload_param.device = cpu needs zero_optimization.stage 3"), std::string::npos) << two.out;
  const Result cap = run(kBin + " train --config configs/mnist_mlp.json run.device=sim run.device_memory_mb=1", 60);
  EXPECT_NE(cap.code, 0);
  EXPECT_EQ(count_lines(cap.out), 1) << cap.out;  // the plan's line before step 1 (probe 4, case 13)
  EXPECT_NE(cap.out.find("run.device_memory_mb=1 (sim:0) fits no plan"), std::string::npos) << cap.out;
  const Result host = run(kBin + " train --config configs/mnist_mlp.json run.device_memory_mb=100", 60);
  EXPECT_NE(host.out.find("caps a device's memory, but run.device is cpu"), std::string::npos) << host.out;
  const Result bad = run(kBin + " train --config configs/mnist_mlp.json run.device=gpu", 60);
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.out.find("'run.device' must be one of cpu, sim, sim:0, cuda, cuda:K, got \"gpu\""), std::string::npos)
      << bad.out;
}

}  // namespace
