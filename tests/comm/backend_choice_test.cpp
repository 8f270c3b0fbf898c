// Note [backend choice]: what run.comm_backend becomes, on every side of each branch, without a
// GPU (the GPUs a process sees and whether NCCL is built are inputs here).
#include <gtest/gtest.h>

#include "zt/comm/group.h"
#include "zt/core/error.h"

namespace zt::comm {
namespace {

// Two ranks on a node of two GPUs, under mpirun, in a CUDA build: auto's case for nccl.
BackendSetting gpu_node() {
  return {.requested = "auto", .under_mpirun = true, .on_gpu = true, .local_ranks = 2, .gpus = 2, .nccl_built = true};
}

std::string config_error(const BackendSetting& s) {
  try {
    choose_backend(s);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::config) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no error for " << s.requested;
  return "";
}

TEST(BackendChoice, AutoTakesNcclWithAGpuForEachRankOfTheNode) {
  BackendChoice c = choose_backend(gpu_node());
  EXPECT_EQ(c.backend, "nccl");
  EXPECT_EQ(c.note, "");
  BackendSetting more_gpus = gpu_node();
  more_gpus.gpus = 8;
  EXPECT_EQ(choose_backend(more_gpus).backend, "nccl");
}

TEST(BackendChoice, RanksSharingAGpuStageThroughTheHostGroupAndSayWhy) {
  BackendSetting s = gpu_node();
  s.local_ranks = 4;
  const BackendChoice c = choose_backend(s);
  EXPECT_EQ(c.backend, "auto");  // make_group("auto"): shm on one node, mpi or shm+mpi across nodes
  EXPECT_EQ(c.note,
            "run.comm_backend=auto: 4 ranks on this node share 2 GPUs and NCCL needs one a rank, so "
            "collectives are staged through host memory");
  s.gpus = 1;
  EXPECT_NE(choose_backend(s).note.find("share 1 GPU and"), std::string::npos);
  s = gpu_node();
  s.nccl_built = false;
  EXPECT_EQ(choose_backend(s).backend, "auto");
  EXPECT_NE(choose_backend(s).note.find("this build has no NCCL"), std::string::npos);
}

TEST(BackendChoice, AutoOnCpusAndForOneProcessIsWhatItWas) {
  BackendSetting s = gpu_node();
  s.on_gpu = false;
  EXPECT_EQ(choose_backend(s).backend, "auto");
  EXPECT_EQ(choose_backend(s).note, "");
  s.under_mpirun = false;
  EXPECT_EQ(choose_backend(s).backend, "local");
  s = gpu_node();
  s.under_mpirun = false;
  s.local_ranks = 1;
  EXPECT_EQ(choose_backend(s).backend, "local");  // one process on a GPU: nothing to communicate
  s = gpu_node();
  s.point_to_point = true;
  EXPECT_EQ(choose_backend(s).backend, "mpi");  // the parameter server's pushes and pulls
}

TEST(BackendChoice, ANamedBackendIsTakenAsNamed) {
  for (const char* b : {"local", "mpi", "shm"}) {
    BackendSetting s = gpu_node();
    s.requested = b;
    EXPECT_EQ(choose_backend(s).backend, b);
    s.on_gpu = false;
    EXPECT_EQ(choose_backend(s).backend, b);
  }
  BackendSetting s = gpu_node();
  s.requested = "nccl";
  EXPECT_EQ(choose_backend(s).backend, "nccl");
  s.under_mpirun = false;
  s.local_ranks = 1;
  EXPECT_EQ(choose_backend(s).backend, "nccl");  // one rank on one GPU: NCCL allows it
}

TEST(BackendChoice, NcclItCannotServeIsOneConfigErrorWithTheNearestSetting) {
  BackendSetting s = gpu_node();
  s.requested = "nccl";
  s.on_gpu = false;
  EXPECT_NE(config_error(s).find("run.comm_backend=nccl needs run.device=cuda"), std::string::npos);
  s = gpu_node();
  s.requested = "nccl";
  s.local_ranks = 3;
  const std::string shared = config_error(s);
  EXPECT_NE(shared.find("3 ranks on this node but 2 GPUs"), std::string::npos) << shared;
  EXPECT_NE(shared.find("nearest valid: auto"), std::string::npos) << shared;
  s = gpu_node();
  s.requested = "nccl";
  s.nccl_built = false;
  EXPECT_NE(config_error(s).find("this build has no CUDA"), std::string::npos);
}

}  // namespace
}  // namespace zt::comm
