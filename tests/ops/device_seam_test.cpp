// The device seam (Note [kernel table], Note [device copies]): which backends and kernels a build
// has, one clear error for a device or kernel it lacks or for inputs on different devices, and
// the same op results on a GPU as on the CPU where one is present (skipped, with a line, without).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "../common/error_of.h"
#include "zt/core/random.h"
#include "zt/ops/ops.h"
#include "zt/ops/update.h"

namespace zt {
namespace {

using testing_util::error_of;

bool has_cuda_backend() {
  const auto b = ops::backends();
  return std::find(b.begin(), b.end(), "cuda") != b.end();
}

TEST(DeviceSeam, CpuIsAlwaysABackendAndHasEveryKernelButTheDeviceUpdates) {
  EXPECT_EQ(ops::backends().front(), "cpu");
  for (const std::string& k : ops::kernel_names()) {
    const bool update = k == "adam_update" || k == "sgd_update";
    EXPECT_EQ(ops::supports(k, Device::cpu()), !update) << k;
  }
}

TEST(DeviceSeam, AskingForAnUnknownKernelIsAnError) {
  EXPECT_NE(error_of([] { ops::supports("matmull", Device::cpu()); }).find("unknown kernel 'matmull'"),
            std::string::npos);
}

TEST(DeviceSeam, ABuildWithoutCudaSupportsNothingThereAndSaysSo) {
  if (has_cuda_backend()) GTEST_SKIP() << "this build has the cuda backend";
  EXPECT_EQ(ops::backends(), std::vector<std::string>{"cpu"});
  EXPECT_FALSE(ops::supports("matmul", Device::cuda(0)));
  EXPECT_FALSE(is_available(Device::cuda(0)));
  EXPECT_EQ(cuda_device_count(), 0);
  EXPECT_NE(error_of([] { Tensor::empty({4}, DType::f32, Device::cuda(0)); }).find("not available in this build"),
            std::string::npos);
  EXPECT_NE(error_of([] { synchronize(Device::cuda(0)); }).find("not available in this build"), std::string::npos);
}

TEST(DeviceSeam, ACudaBuildHasEveryKernelOnTheGpu) {
  if (!has_cuda_backend()) GTEST_SKIP() << "built without CUDA";
  for (const std::string& k : ops::kernel_names()) EXPECT_TRUE(ops::supports(k, Device::cuda(0))) << k;
}

// A tensor that claims a GPU without memory (Tensor::unallocated) is enough to reach the check.
TEST(DeviceSeam, InputsOnDifferentDevicesAreOneErrorNamingBoth) {
  const Tensor a = Tensor::full({2, 3}, 1.f);
  const Tensor b = Tensor::unallocated({2, 3}, DType::f32, Device::cuda(0));
  EXPECT_EQ(error_of([&] { ops::add(a, b); }), "[add] tensors are on different devices: cpu and cuda:0");
  const Tensor w = Tensor::unallocated({4, 3}, DType::f32, Device::cuda(0));
  EXPECT_EQ(error_of([&] { ops::linear(a, w, nullptr); }), "[matmul] tensors are on different devices: cpu and cuda:0");
  Tensor bias = Tensor::unallocated({3}, DType::f32, Device::cuda(0));  // a non-const pointer is checked too
  EXPECT_EQ(error_of([&] { ops::linear(a, Tensor::full({3, 3}, 1.f), &bias); }),
            "[matmul] tensors are on different devices: cpu and cuda:0");
}

TEST(DeviceSeam, AKernelABackendLacksIsOneErrorNamingKernelAndDevice) {
  const Tensor p = Tensor::full({8}, 1.f), g = Tensor::full({8}, 0.5f);
  const Tensor m = Tensor::zeros({8}), v = Tensor::zeros({8});
  ops::AdamStep s{};
  EXPECT_EQ(error_of([&] {
              ops::adam_update(s, {p, Tensor(), g, m, v, 1.f});
            }),
            "[adam_update] the cpu backend has no adam_update kernel (device cpu; "
            "ops::supports(\"adam_update\", cpu) is false)");
  const Tensor g_gpu = Tensor::unallocated({8}, DType::f32, Device::cuda(0));
  EXPECT_EQ(error_of([&] {
              ops::sgd_update(ops::SgdStep{}, {p, Tensor(), g_gpu, Tensor(), Tensor(), 1.f});
            }),
            "[sgd_update] tensors are on different devices: cpu and cuda:0");
}

TEST(DeviceSeam, ToTheSameDeviceIsTheSameTensor) {
  const Tensor a = Tensor::full({3}, 2.f);
  EXPECT_TRUE(a.to(Device::cpu()).same(a));
}

// ---- on a GPU (skipped without one) ----

class OnGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!is_available(Device::cuda(0))) GTEST_SKIP() << "no GPU here: the device seam's GPU checks need one";
  }
  static Tensor random(const Shape& s, DType dt, uint64_t seed) {
    std::vector<float> v(size_t(shape_numel(s)));
    Generator rng(seed);
    for (float& x : v) x = rng.normal(0.f, 1.f);
    return Tensor::from_vector(v, s, dt);
  }
};

TEST_F(OnGpu, CopiesRoundTripContiguousStridedAndConverted) {
  const Tensor a = random({5, 7}, DType::f32, 1);
  const Tensor g = a.to(Device::cuda(0));
  EXPECT_EQ(g.device(), Device::cuda(0));
  EXPECT_EQ(g.to_vector(), a.to_vector());
  EXPECT_EQ(g.transpose(0, 1).contiguous().to_vector(), a.transpose(0, 1).contiguous().to_vector());
  EXPECT_EQ(g.to(DType::bf16).to_vector(), a.to(DType::bf16).to_vector());
  Tensor z = Tensor::full({5, 7}, 3.f, DType::bf16, Device::cuda(0));
  EXPECT_EQ(z.to_vector(), std::vector<float>(35, 3.f));
  z.zero_();
  EXPECT_EQ(z.to_vector(), std::vector<float>(35, 0.f));
}

TEST_F(OnGpu, OutputsLiveOnTheInputsDeviceAndMatchTheCpu) {
  for (DType dt : {DType::f32, DType::bf16}) {
    const Tensor x = random({16, 64}, dt, 2), w = random({32, 64}, dt, 3);
    const Tensor y = ops::gelu(ops::linear(x.to(Device::cuda(0)), w.to(Device::cuda(0)), nullptr));
    EXPECT_EQ(y.device(), Device::cuda(0));
    const auto want = ops::gelu(ops::linear(x, w, nullptr)).to_vector(), got = y.to_vector();
    for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 2e-2f * (1 + std::fabs(want[i]))) << i;
  }
}

TEST_F(OnGpu, TheDeviceAllocatorAccountsTagsAndPeaks) {
  Allocator& a = allocator_for(Device::cuda(0));
  a.reset_peaks();
  const size_t before = a.stats().of(MemTag::grad);
  {
    Tensor t = Tensor::empty({1024}, DType::f32, MemTag::grad, Device::cuda(0));
    EXPECT_EQ(a.stats().of(MemTag::grad), before + 4096);
  }
  EXPECT_EQ(a.stats().of(MemTag::grad), before);
  EXPECT_GE(a.stats().peak_of(MemTag::grad), before + 4096);
}

}  // namespace
}  // namespace zt
