// The nccl backend (Note [nccl backend]): a build without CUDA says so in one line; on a GPU, a
// one-rank group runs every collective on device tensors, counts its bytes and refuses host
// tensors, and a FileStore rendezvous works (skipped, with a line, where no GPU is present).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "../common/error_of.h"
#include "zt/comm/group.h"
#include "zt/comm/store.h"

namespace zt::comm {
namespace {

using testing_util::error_of;

TEST(Nccl, ABuildWithoutCudaSaysTheBackendIsNotAvailable) {
  if (nccl_available()) GTEST_SKIP() << "this build has the nccl backend";
  EXPECT_EQ(error_of([] { make_group("nccl"); }),
            "[comm] backend 'nccl' is not available in this build (built without CUDA)");
}

class NcclOnGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!nccl_available()) GTEST_SKIP() << "built without CUDA";
    if (!is_available(Device::cuda(0))) GTEST_SKIP() << "no GPU here: the nccl checks need one";
  }
  static Tensor on_gpu(std::vector<float> v, DType dt = DType::f32) {
    const int64_t n = int64_t(v.size());
    return Tensor::from_vector(v, {n}, dt, Device::cuda(0));
  }
};

TEST_F(NcclOnGpu, OneRankRunsEveryCollectiveOnDeviceTensors) {
  GroupPtr g = make_group("nccl");
  ASSERT_EQ(g->size(), 1);
  EXPECT_STREQ(g->backend(), "nccl");
  for (DType dt : {DType::f32, DType::bf16}) {
    Tensor buf = on_gpu({1, 2, 3, 4}, dt);
    g->all_reduce(buf, ReduceOp::avg);
    EXPECT_EQ(buf.to_vector(), (std::vector<float>{1, 2, 3, 4}));
    Tensor out = Tensor::empty({4}, dt, Device::cuda(0));
    g->all_gather(buf, out);
    EXPECT_EQ(out.to_vector(), buf.to_vector());
    g->reduce_scatter(buf, out, ReduceOp::sum);
    EXPECT_EQ(out.to_vector(), buf.to_vector());
    g->all_to_all(buf, out);
    EXPECT_EQ(out.to_vector(), buf.to_vector());
    g->broadcast(buf, 0);
  }
  g->barrier();
  EXPECT_EQ(g->all_reduce_scalar(2.5), 2.5);
  EXPECT_GT(g->stats().total_bytes(), 0u);
}

TEST_F(NcclOnGpu, SynchronizeOrdersTheComputeStreamWithoutWaitingOnTheHost) {
  GroupPtr g = make_group("nccl");
  Tensor buf = on_gpu(std::vector<float>(1 << 20, 1.f));
  WorkPtr w = g->all_reduce_async(buf, ReduceOp::sum);
  w->synchronize();  // the compute stream now runs after the collective
  Tensor twice = Tensor::zeros({1 << 20}, DType::f32, Device::cuda(0));
  twice.copy_(buf);  // queued behind it: sees the reduced values
  EXPECT_EQ(twice.to_vector()[12345], 1.f);
  EXPECT_TRUE(w->test());
}

TEST_F(NcclOnGpu, HostTensorsAreRefusedBeforeAnythingIsSent) {
  GroupPtr g = make_group("nccl");
  Tensor host = Tensor::full({4}, 1.f);
  EXPECT_EQ(error_of([&] { g->all_reduce(host); }),
            "[comm] all_reduce: buffer tensor is on cpu, but the group's tensors live on cuda:0");
  EXPECT_EQ(g->last_seq(), 0u);
}

TEST_F(NcclOnGpu, AFileStoreRendezvousMakesAOneRankGroup) {
  const std::string dir = ::testing::TempDir() + "zt_nccl_store_" + std::to_string(::getpid());
  auto store = make_file_store(dir);
  GroupPtr g = make_nccl_group(0, 1, 0, *store, "test", 60.0);
  Tensor buf = on_gpu({5, 6});
  g->all_reduce(buf);
  EXPECT_EQ(buf.to_vector(), (std::vector<float>{5, 6}));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace zt::comm
