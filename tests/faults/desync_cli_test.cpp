// Note [collective signatures] end to end (issue 31): a rank whose program leaves its peers' (it
// skips a step, or evaluates while they train) ends the job with a line naming both sides'
// collectives, well before the comm timeout, at every stage, on shm and on mpi, at N = 2 and 3.
// The same run with run.check_collectives=false is what the check prevents: it hangs until the
// timeout or trains on mispaired buffers.
#include "faults_util.h"

using namespace zt::faults;

namespace {

struct Case {
  const char* fault;    // ZT_FAULT, on rank 1 at step 3
  const char* backend;  // run.comm_backend
  int np, stage;
};

class Desync : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    if (!have_mnist()) GTEST_SKIP() << "MNIST not installed (scripts/setup.sh)";
  }
};

TEST_P(Desync, EndsWithOneLineNamingBothCollectives) {
  const Case c = GetParam();
  const std::string dir = tmpdir(std::string("desync_") + c.fault + "_" + c.backend);
  const std::string mpi = std::string(ZT_MPIRUN) + " -np " + std::to_string(c.np) + " ";
  // A timeout no healthy step reaches here: a report at it would be the hang this check prevents.
  const Result r = run(std::string("env ZT_FAULT=") + c.fault + ":rank=1:step=3 " + mpi + "-x ZT_FAULT " + kBin +
                           kTrain + " train_batch_size=48 steps_per_print=1 run.comm_timeout_s=60 run.comm_backend=" + c.backend +
                           " zero_optimization.stage=" + std::to_string(c.stage) + " run.dir=" + dir,
                       100);
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_EQ(r.out.find("timed out"), std::string::npos) << r.out;
  const size_t at = r.out.find("[comm] ranks out of step: rank ");
  ASSERT_NE(at, std::string::npos) << r.out;
  const std::string line = r.out.substr(at, r.out.find('\n', at) - at);
  // Both sides, with their steps. skip: rank 1 votes on (or reports) step 4 while rank 0 does step 3.
  // eval: rank 1's evaluation (its all-reduce, or at stage 3 its next batch's gathers) meets rank
  // 0's step 3 (its gradients, or its backward gathers).
  EXPECT_NE(line.find(" while rank "), std::string::npos) << line;
  EXPECT_NE(line.find("'step 3, "), std::string::npos) << line;
  if (std::string(c.fault) == "skip") {
    EXPECT_NE(line.find("'step 4, "), std::string::npos) << line;
  }
}

INSTANTIATE_TEST_SUITE_P(Faults, Desync,
                         ::testing::Values(Case{"skip", "shm", 2, 0}, Case{"skip", "mpi", 2, 2},
                                           Case{"skip", "shm", 3, 3}, Case{"skip", "mpi", 3, 3},
                                           Case{"eval", "shm", 2, 3}, Case{"eval", "mpi", 2, 1},
                                           Case{"eval", "mpi", 3, 3}),
                         [](const auto& info) {
                           const Case& c = info.param;
                           return std::string(c.fault) + "_" + c.backend + "_np" + std::to_string(c.np) + "_stage" +
                                  std::to_string(c.stage);
                         });

TEST(DesyncSpec, ADivergenceThatNeverFiresIsOneLine) {
  const Result r = run("env ZT_FAULT=skip:rank=1:step=99 " + kMpi + "-x ZT_FAULT " + kBin + kTrain + " run.dir=" +
                       tmpdir("desync_bad"));
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_NE(one_failure_line(r).find("step=99 never fires: the run has 20 steps"), std::string::npos) << r.out;
}

}  // namespace
