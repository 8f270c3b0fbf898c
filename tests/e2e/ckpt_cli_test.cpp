// The checkpoint tools as a user runs them: train -> import (under mpirun, another stage) ->
// export gives the trained weights back byte for byte; ckpt ls / inspect --json describe what
// was saved; verify exits 1 naming a corrupt file; usage errors exit 2; importing weights of
// another model names the parameter and both shapes.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include "e2e_util.h"

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

using namespace zt::e2e;

const std::string kBin = zt::testing::shell_word(ZT_BIN);  // a shell word wherever the clone lives
const std::string kMpirun = ZT_MPIRUN;
const std::string kConfig = " --config configs/mnist_mlp.json";

// name -> (dtype, shape, bytes) of a safetensors file, read here without the library.
std::map<std::string, std::tuple<std::string, json, std::string>> tensors_of(const std::string& path) {
  const std::string b = slurp(path);
  uint64_t n = 0;
  std::memcpy(&n, b.data(), 8);
  json h = json::parse(b.substr(8, n));
  const std::string data = b.substr(8 + n);
  std::map<std::string, std::tuple<std::string, json, std::string>> out;
  for (auto& [k, v] : h.items()) {
    if (k == "__metadata__") continue;
    const size_t a = v["data_offsets"][0], z = v["data_offsets"][1];
    out[k] = {v["dtype"], v["shape"], data.substr(a, z - a)};
  }
  return out;
}

// Trained weights of a short run (f32): the file every test starts from.
std::string trained_weights(const std::string& dir) {
  const Result r = run(kBin + " train" + kConfig + " run.max_steps=5 run.eval_at_end=false run.dir=" + dir + "/run");
  EXPECT_EQ(r.code, 0) << r.out;
  return dir + "/run/model.safetensors";
}

TEST(CkptCli, ImportUnderMpirunThenExportGivesTheTrainedWeightsBack) {
  if (!have_mnist()) GTEST_SKIP() << "MNIST not installed (scripts/setup.sh)";
  const std::string dir = tmpdir("roundtrip"), weights = trained_weights(dir), ck = dir + "/ck";
  const std::string launch = kMpirun.empty() ? "" : kMpirun + " -np 2 ";
  Result r = run(launch + kBin + " import " + weights + kConfig + " --out " + ck +
                 " zero_optimization.stage=3 zero_optimization.reduce_bucket_size=100000");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("run.resume=latest"), std::string::npos) << r.out;

  r = run(kBin + " export " + ck + " --out " + dir + "/back.safetensors");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("peak memory"), std::string::npos) << r.out;
  const auto want = tensors_of(weights), got = tensors_of(dir + "/back.safetensors");
  EXPECT_EQ(got.size(), 6u);
  EXPECT_TRUE(got == want) << "exported tensors differ from the trained weights";
  // An existing --out is replaced only with --force, as import's checkpoints; without, it stays.
  r = run(kBin + " export " + ck + " --out " + dir + "/back.safetensors --dtype bf16");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_EQ(count_lines(r.out), 1) << r.out;
  EXPECT_NE(r.out.find("[export] " + dir + "/back.safetensors already exists: pass --force to replace it"),
            std::string::npos)
      << r.out;
  EXPECT_TRUE(tensors_of(dir + "/back.safetensors") == want);
  r = run(kBin + " export " + ck + " --out " + dir + "/back.safetensors --dtype bf16 --force");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(std::get<0>(tensors_of(dir + "/back.safetensors").at("0.weight")), "BF16");

  r = run(kBin + " ckpt ls " + ck + " --json");
  ASSERT_EQ(r.code, 0) << r.out;
  const json ls = json::parse(r.out);
  ASSERT_EQ(ls.size(), 1u) << r.out;
  EXPECT_EQ(ls[0]["tag"], "step_00000000");
  EXPECT_EQ(ls[0]["world_size"], kMpirun.empty() ? 1 : 2);
  EXPECT_EQ(ls[0]["stage"], 3);
  EXPECT_EQ(ls[0]["latest"], true);

  r = run(kBin + " ckpt inspect " + ck + " --json");
  ASSERT_EQ(r.code, 0) << r.out;
  const json in = json::parse(r.out);
  EXPECT_EQ(in["params"].size(), 6u);
  EXPECT_EQ(in["params"][0]["name"], "0.weight");
  EXPECT_EQ(in["params"][0]["shape"], json::array({256, 784}));
  EXPECT_EQ(in["step"], 0);
  EXPECT_EQ(in["counters"]["optimizer_steps"], 0);
  EXPECT_EQ(in["extra"]["imported_from"], fs::absolute(weights).string());
  EXPECT_EQ(in["states"][0]["name"], "param");

  r = run(kBin + " ckpt inspect " + ck);  // the table names every parameter
  ASSERT_EQ(r.code, 0) << r.out;
  for (const char* name : {"0.weight", "4.bias", "rank_00000.bin", "exp_avg_sq"})
    EXPECT_NE(r.out.find(name), std::string::npos) << name << "\n" << r.out;
  fs::remove_all(dir);
}

TEST(CkptCli, VerifyExitsOneNamingTheCorruptFile) {
  if (!have_mnist()) GTEST_SKIP() << "MNIST not installed (scripts/setup.sh)";
  const std::string dir = tmpdir("verify"), weights = trained_weights(dir), ck = dir + "/ck";
  ASSERT_EQ(run(kBin + " import " + weights + kConfig + " --out " + ck).code, 0);
  Result r = run(kBin + " ckpt verify " + ck);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("ok "), std::string::npos) << r.out;
  // --json, as the README shows it: an object per checkpoint, and nothing else on stdout.
  r = run(kBin + " ckpt verify " + ck + " --json");
  ASSERT_EQ(r.code, 0) << r.out;
  const json ok = json::parse(r.out);
  ASSERT_EQ(ok.size(), 1u) << r.out;
  EXPECT_EQ(ok[0]["checkpoint"], ck + "/step_00000000");
  EXPECT_EQ(ok[0]["ok"], true);
  EXPECT_EQ(ok[0]["shard_files"], 1);
  EXPECT_GT(ok[0]["bytes"].get<int64_t>(), 0);

  const std::string victim = ck + "/step_00000000/rank_00000.bin";
  {
    std::fstream f(victim, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(1000);
    char c = 0;
    f.read(&c, 1);
    c = char(c ^ 0x01);
    f.seekp(1000);
    f.write(&c, 1);
  }
  for (const std::string& cmd : {" ckpt verify " + ck, " ckpt verify " + ck + "/step_00000000",
                                 " export " + ck + " --out " + dir + "/x.safetensors"}) {
    r = run(kBin + cmd);
    EXPECT_EQ(r.code, 1) << cmd << "\n" << r.out;
    EXPECT_NE(r.out.find(victim + " is corrupt"), std::string::npos) << cmd << "\n" << r.out;
  }
  EXPECT_FALSE(fs::exists(dir + "/x.safetensors"));
  r = run(kBin + " ckpt verify " + ck + " --json");  // the array on stdout, then the error on stderr
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_EQ(count_lines(r.out), 2) << r.out;
  EXPECT_NE(r.out.find("\nzerotrain: error: [ckpt] 1 of 1 checkpoints failed verification"), std::string::npos)
      << r.out;
  const json failed = json::parse(r.out.substr(0, r.out.find('\n')));
  ASSERT_EQ(failed.size(), 1u) << r.out;
  EXPECT_EQ(failed[0]["ok"], false);
  EXPECT_NE(failed[0]["error"].get<std::string>().find(victim + " is corrupt"), std::string::npos) << r.out;
  fs::remove_all(dir);
}

TEST(CkptCli, ImportingAnotherModelNamesTheParameterAndBothShapes) {
  if (!have_mnist()) GTEST_SKIP() << "MNIST not installed (scripts/setup.sh)";
  const std::string dir = tmpdir("other"), weights = trained_weights(dir);
  const Result r = run(kBin + " import " + weights + kConfig + " --out " + dir + "/ck model.hidden=[128,256]");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("parameter '0.weight' has shape [256, 784] in the file and [128, 784] in the model"),
            std::string::npos)
      << r.out;
  EXPECT_FALSE(fs::exists(dir + "/ck/latest"));
  fs::remove_all(dir);
}

TEST(CkptCli, UsageErrorsExitTwoAndMissingFoldersOne) {
  for (const std::string cmd : {" ckpt", " ckpt ls", " export /tmp", " export /tmp --out x --dtype f64",
                                " import x.safetensors --out d", " ckpt frobnicate /tmp"}) {
    const Result r = run(kBin + cmd);
    EXPECT_EQ(r.code, 2) << cmd << "\n" << r.out;
  }
  for (const std::string cmd : {" ckpt ls /nonexistent/zt", " ckpt verify /nonexistent/zt",
                                " ckpt inspect /nonexistent/zt", " export /nonexistent/zt --out /tmp/x.st"}) {
    const Result r = run(kBin + cmd);
    EXPECT_EQ(r.code, 1) << cmd << "\n" << r.out;
    EXPECT_NE(r.out.find("/nonexistent/zt"), std::string::npos) << cmd << "\n" << r.out;
  }
  const Result h = run(kBin + " --help");
  for (const char* cmd : {"export", "import", "ckpt"}) EXPECT_NE(h.out.find(cmd), std::string::npos) << cmd;
}

}  // namespace
