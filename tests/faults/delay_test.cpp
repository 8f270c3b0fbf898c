// Delay injection (issue 31): one rank sleeping before every all-gather, before every
// reduce-scatter, after every forward and before every optimizer step, one place at a time and all
// together, trains to the undelayed run's weights bit for bit, at every stage, with overlap on
// (the default) and with offload: nothing the engine computes depends on when a peer arrives.
#include "faults_util.h"

using namespace zt::faults;

namespace {

// The weights of a 2-rank run of `args`, with ZT_FAULT = `fault` ("" = none).
std::string weights(const std::string& dir, const std::string& args, const std::string& fault) {
  const std::string env = fault.empty() ? "" : "env ZT_FAULT=" + fault + " ";
  const Result r = run(env + kMpi + "-x ZT_FAULT " + kBin + kTrain + args + " run.eval_at_end=false run.dir=" + dir);
  EXPECT_EQ(r.code, 0) << r.out;
  if (!fault.empty()) {
    EXPECT_NE(r.out.find("fault injection: rank 1 sleeps 3 ms at"), std::string::npos) << r.out;
  }
  return read_bytes(dir + "/model.safetensors");
}

class Delays : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    if (!have_mnist()) GTEST_SKIP() << "MNIST not installed (scripts/setup.sh)";
  }
};

TEST_P(Delays, ARankThatIsLateEverywhereTrainsTheSameWeightsBitForBit) {
  const int stage = GetParam();
  const std::string dir = tmpdir("delay_stage" + std::to_string(stage)),
                    args = " zero_optimization.stage=" + std::to_string(stage);
  const std::string plain = weights(dir + "/plain", args, "");
  ASSERT_FALSE(plain.empty());
  EXPECT_EQ(weights(dir + "/all", args, "delay:rank=1:ms=3:at=all"), plain) << "all places, stage " << stage;
  if (stage != 3) return;
  for (const char* at : {"all_gather", "reduce_scatter", "forward", "step"})
    EXPECT_EQ(weights(dir + "/" + at, args, std::string("delay:rank=1:ms=3:at=") + at), plain) << at;
  // Offloaded optimizer states and parameters (ZeRO-Infinity), late everywhere.
  const std::string swap = " 'zero_optimization.offload_optimizer={\"device\": \"nvme\", \"nvme_path\": \"" + dir +
                           "/nvme\"}' 'zero_optimization.offload_param={\"device\": \"nvme\", \"nvme_path\": \"" + dir +
                           "/nvme\"}'";
  EXPECT_EQ(weights(dir + "/offload", args + swap, "delay:rank=1:ms=3:at=all"), plain) << "offloaded";
}

INSTANTIATE_TEST_SUITE_P(Stages, Delays, ::testing::Values(0, 1, 2, 3), [](const auto& info) {
  return "stage" + std::to_string(info.param);
});

TEST(DelaySpec, WhatItCannotTakeIsOneLine) {
  for (const auto& [spec, says] : std::vector<std::pair<std::string, std::string>>{
           {"delay:rank=1:ms=3", "delay needs rank=R, ms=N and at=PLACES"},
           {"delay:rank=1:ms=0:at=all", "the delay must be 1 to 60000 ms"},
           {"delay:rank=1:ms=3:at=backward", "delay place 'backward' unknown"},
           {"delay:rank=5:ms=3:at=all", "rank=5 never fires: the job has 2 ranks"}}) {
    const Result r = run("env ZT_FAULT=" + spec + " " + kMpi + "-x ZT_FAULT " + kBin + kTrain + " run.dir=" +
                         tmpdir("delay_bad"));
    EXPECT_NE(r.code, 0) << r.out;
    EXPECT_NE(one_failure_line(r).find(says), std::string::npos) << spec << ": " << r.out;
  }
}

}  // namespace
