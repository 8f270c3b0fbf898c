// `zerotrain train` with run.strategy=parameter_server (Note [parameter server]) under mpirun:
// the same losses as ZeRO with the same global batch, weights that `eval` reads, every rank's
// memory in the records, and one-line errors for values it cannot take.
#include <gtest/gtest.h>

#include <cmath>

#include "e2e_util.h"

namespace {

using namespace zt::e2e;

const std::string kBin = zt::testing::shell_word(ZT_BIN);  // a shell word wherever the clone lives
const std::string kMpi = std::string(ZT_MPIRUN) + " -np ";
const std::string kArgs =
    " --config configs/mnist_mlp.json data.train_limit=6400 data.test_limit=2000"
    " run.max_steps=40 steps_per_print=10";

std::vector<nlohmann::json> steps_of(const std::string& dir) {
  std::vector<nlohmann::json> out;
  for (auto& r : read_jsonl(dir + "/metrics.jsonl"))
    if (r.contains("loss")) out.push_back(r);
  return out;
}

// 2 workers with 1 or 2 servers against ZeRO stage 0 on 2 ranks: global batch 64 (the config's),
// micro-batch m of worker w being that of rank w.
TEST(ParamServerCli, FollowsZeroWithTheSameGlobalBatchAndSavesWeights) {
  if (!have_mnist()) GTEST_SKIP() << "MNIST not installed (scripts/setup.sh)";
  const std::string zdir = tmpdir("ps_zero");
  Result z = run(kMpi + "2 " + kBin + " train" + kArgs + " run.dir=" + zdir, 300);
  ASSERT_EQ(z.code, 0) << z.out;
  const auto want = steps_of(zdir);
  const double want_acc = read_json(zdir + "/summary.json")["test_accuracy"];
  for (int servers : {1, 2}) {
    SCOPED_TRACE("servers " + std::to_string(servers));
    const std::string dir = tmpdir("ps" + std::to_string(servers));
    const std::string args = kArgs + " run.strategy=parameter_server run.parameter_servers=" + std::to_string(servers) +
                             " zero_optimization.stage=2 run.dir=" + dir;
    Result t = run(kMpi + std::to_string(2 + servers) + " " + kBin + " train" + args, 300);
    ASSERT_EQ(t.code, 0) << t.out;
    EXPECT_NE(t.out.find("parameter server: " + std::to_string(servers) + " server"), std::string::npos) << t.out;
    EXPECT_NE(t.out.find("(zero_optimization.stage is not used)"), std::string::npos) << t.out;
    EXPECT_NE(t.out.find("comm backend mpi"), std::string::npos) << t.out;
    const auto got = steps_of(dir);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_NEAR(got[i]["loss"].get<double>(), want[i]["loss"].get<double>(), 1e-4) << "record " << i;
      EXPECT_NEAR(got[i]["grad_norm"].get<double>(), want[i]["grad_norm"].get<double>(), 1e-3) << "record " << i;
    }
    // Every rank's memory: servers hold their range's states and no activations; workers the model.
    const auto& ranks = got.back()["memory_per_rank"];
    ASSERT_EQ(ranks.size(), size_t(2 + servers));
    const auto start = read_jsonl(dir + "/metrics.jsonl").front();
    for (const auto& r : ranks) {
      const bool server = r["role"] == "server";
      EXPECT_EQ(server, r["rank"].get<int>() < servers) << r;
      const auto& plan = start["memory_plan"][server ? "server" : "worker"];
      for (const char* tag : {"param", "grad", "master", "optim"})
        EXPECT_EQ(r["memory_peak"][tag], plan[tag]) << tag << " " << r;
      // (a server's few bytes are the stop votes' scalars)
      EXPECT_EQ(r["memory_peak"]["activation"].get<int64_t>() > 1024, !server) << r;
    }
    const double acc = read_json(dir + "/summary.json")["test_accuracy"];
    EXPECT_NEAR(acc, want_acc, 2e-3);
    Result ev = run(kBin + " eval" + args, 120);
    ASSERT_EQ(ev.code, 0) << ev.out;
    char line[64];
    std::snprintf(line, sizeof line, "test accuracy: %.4f", acc);
    EXPECT_NE(ev.out.find(line), std::string::npos) << ev.out << " vs " << line;
  }
}

TEST(ParamServerCli, ValuesItCannotTakeAreOneLineErrors) {
  const std::string dir = tmpdir("ps_bad");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"3 " + kBin + " train" + kArgs + " run.strategy=parameter_server run.parameter_servers=3",
       "[config] run.parameter_servers = 3 leaves no worker at world size 3 (it must be less than the world size; "
       "the nearest valid value is 2)"},
      {"2 " + kBin + " train" + kArgs + " run.strategy=ps", "'run.strategy' must be one of zero, parameter_server"},
      {"2 " + kBin + " train" + kArgs + " run.strategy=parameter_server run.parameter_servers=0",
       "'run.parameter_servers' must be a positive integer (the nearest valid value is 1), got 0"},
      {"2 " + kBin + " train" + kArgs + " run.strategy=parameter_server fp16.enabled=true",
       "'fp16.enabled' = true is not available with run.strategy parameter_server"},
      {"2 " + kBin + " train" + kArgs + " run.strategy=parameter_server checkpoint.every_steps=5",
       "'checkpoint.every_steps' = 5 is not available with run.strategy parameter_server"},
      // Issue 31, probe case 8: ZeRO++'s keys are ZeRO's collectives, which the servers have none of.
      {"2 " + kBin + " train" + kArgs + " run.strategy=parameter_server zero_optimization.stage=3 "
       "zero_optimization.zero_quantized_weights=true",
       "'zero_optimization.zero_quantized_weights' = true is not available with run.strategy parameter_server"},
      {"2 " + kBin + " train" + kArgs + " run.strategy=parameter_server zero_optimization.zero_quantized_gradients=true",
       "'zero_optimization.zero_quantized_gradients' = true is not available with run.strategy parameter_server"},
      // Probe case 12: the batch is split over the workers, and the line says so.
      {"4 " + kBin + " train" + kArgs + " run.strategy=parameter_server train_batch_size=64 "
       "train_micro_batch_size_per_gpu=32 gradient_accumulation_steps=1",
       "* 3 workers (world size 4 less 1 server)"},
  };
  for (const auto& [cmd, want] : cases) {
    Result r = run(kMpi + cmd + " run.dir=" + dir, 120);
    EXPECT_EQ(r.code, 1) << r.out;
    EXPECT_EQ(count_of(r.out, "zerotrain: error"), 1) << r.out;
    EXPECT_NE(r.out.find(want), std::string::npos) << r.out;
  }
  Result alone = run(kBin + " train" + kArgs + " run.strategy=parameter_server run.dir=" + dir, 60);
  EXPECT_EQ(alone.code, 1) << alone.out;
  EXPECT_EQ(count_lines(alone.out), 1) << alone.out;
  EXPECT_NE(alone.out.find("needs at least 2 ranks (a server and a worker), got world size 1"), std::string::npos)
      << alone.out;
}

}  // namespace
