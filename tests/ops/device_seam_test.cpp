// The device seam (Note [kernel table], Note [device copies]): which backends and kernels a build
// has, one clear error for a device or kernel it lacks or for inputs on different devices, and
// the same op results on a GPU as on the CPU where one is present (skipped, with a line, without).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <thread>

#include "../common/error_of.h"
#include "zt/core/allocator.h"
#include "zt/core/random.h"
#include "zt/core/sim_device.h"
#include "zt/ops/ops.h"
#include "zt/ops/update.h"

namespace zt {
namespace {

using testing_util::error_of;

bool has_cuda_backend() {
  const auto b = ops::backends();
  return std::find(b.begin(), b.end(), "cuda") != b.end();
}

TEST(DeviceSeam, CpuIsAlwaysABackendAndHasEveryKernel) {
  EXPECT_EQ(ops::backends().front(), "cpu");
  for (const std::string& k : ops::kernel_names()) EXPECT_TRUE(ops::supports(k, Device::cpu())) << k;
}

TEST(DeviceSeam, AskingForAnUnknownKernelIsAnError) {
  EXPECT_NE(error_of([] { ops::supports("matmull", Device::cpu()); }).find("unknown kernel 'matmull'"),
            std::string::npos);
}

TEST(DeviceSeam, ABuildWithoutCudaSupportsNothingThereAndSaysSo) {
  if (has_cuda_backend()) GTEST_SKIP() << "this build has the cuda backend";
  EXPECT_EQ(ops::backends(), (std::vector<std::string>{"cpu", "sim"}));
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

TEST(DeviceSeam, AnUpdatesTensorsOnTwoDevicesAreOneError) {
  const Tensor p = Tensor::full({8}, 1.f);
  const Tensor g_gpu = Tensor::unallocated({8}, DType::f32, Device::cuda(0));
  EXPECT_EQ(error_of([&] {
              ops::sgd_update(ops::SgdStep{}, {p, Tensor(), g_gpu, Tensor(), Tensor(), 1.f, Tensor()});
            }),
            "[sgd_update] tensors are on different devices: cpu and cuda:0");
}

// ---- the simulated device (Note [sim device]) ----

Tensor random_on(const Shape& s, uint64_t seed, Device d) {
  std::vector<float> v(size_t(shape_numel(s)));
  Generator rng(seed);
  for (float& x : v) x = rng.normal(0.f, 1.f);
  return Tensor::from_vector(v, s).to(d);
}

TEST(SimDevice, IsAlwaysThereAndHasTheCpusKernels) {
  EXPECT_TRUE(is_available(Device::sim()));
  EXPECT_EQ(Device::sim().str(), "sim:0");
  for (const std::string& k : ops::kernel_names()) EXPECT_EQ(ops::supports(k, Device::sim()), ops::supports(k, Device::cpu())) << k;
  EXPECT_NE(error_of([] { Tensor::empty({2}, DType::f32, Device{DeviceType::sim, 1}); }).find("one sim device"),
            std::string::npos);
}

TEST(SimDevice, OpsFollowTheCpuBitForBit) {
  for (DType dt : {DType::f32, DType::bf16}) {
    const Tensor x = random_on({16, 64}, 2, Device::cpu()).to(dt), w = random_on({32, 64}, 3, Device::cpu()).to(dt);
    const Tensor y = ops::gelu(ops::linear(x.to(Device::sim()), w.to(Device::sim()), nullptr));
    EXPECT_EQ(y.device(), Device::sim());
    EXPECT_EQ(y.to_vector(), ops::gelu(ops::linear(x, w, nullptr)).to_vector());
  }
}

// The host's pointers into sim memory lead nowhere: reading one faults at once.
TEST(SimDeviceDeathTest, AHostReadOfDeviceMemoryFaults) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const Tensor t = Tensor::zeros({4}, DType::f32, Device::sim());
  EXPECT_DEATH(
      {
        volatile float v = t.data<float>()[0];
        (void)v;
      },
      "");
}

// Kernels run on the sim stream, after the host has moved on: memory read without waiting for the
// stream is stale (what a dropped synchronisation gives), and the copies that read it back wait.
TEST(SimDevice, KernelsRunAsynchronouslyAndReadsBackWait) {
  Tensor t = Tensor::zeros({1024}, DType::f32, Device::sim());
  synchronize(Device::sim());
  sim::enqueue([] { std::this_thread::sleep_for(std::chrono::milliseconds(200)); });
  ops::scale_(t, 2.f);  // queued behind the sleep
  t.fill_(0.f);         // zeroes on the stream too
  Tensor one = Tensor::full({1024}, 1.f).to(Device::sim());  // a host copy: waits for the stream
  sim::enqueue([] { std::this_thread::sleep_for(std::chrono::milliseconds(200)); });
  ops::axpy_(t, 3.f, one);
  const float* view = static_cast<const float*>(sim::host_view(t.raw_data()));
  EXPECT_EQ(view[7], 0.f) << "the stream finished the axpy before the host looked: not asynchronous";
  EXPECT_EQ(t.to_vector()[7], 3.f);  // to_vector waits
  EXPECT_EQ(view[7], 3.f);
}

TEST(SimDevice, AKernelsErrorIsRethrownByTheNextSynchronize) {
  sim::enqueue([] { ZT_THROW_AS(ErrorKind::internal, "[test] a kernel failed"); });
  EXPECT_EQ(error_of([] { synchronize(Device::sim()); }), "[test] a kernel failed");
  EXPECT_NO_THROW(synchronize(Device::sim()));  // reported once
}

TEST(SimDevice, TheAllocatorsCapIsOneErrorNamingTheDeviceTheTagAndTheSizes) {
  Allocator& a = allocator_for(Device::sim());
  a.release_cached();
  a.set_budget(size_t(1) << 20);
  const std::string e = error_of([] { Tensor::empty({1 << 19}, DType::f32, MemTag::grad, Device::sim()); });
  a.set_budget(0);
  EXPECT_NE(e.find("sim:0"), std::string::npos) << e;
  EXPECT_NE(e.find("grad"), std::string::npos) << e;
  EXPECT_NE(e.find("allocating 2.00MiB"), std::string::npos) << e;
  EXPECT_NE(e.find("budget of 1.00MiB"), std::string::npos) << e;
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

// Note [padded products]: 256 x 768 x 1025 is past the padding threshold. The forward product's
// result rows are 1025 wide (with and without a bias); each backward product reads an operand
// whose leading dimension is 1025, row-major (dx) and column-major (dW).
TEST_F(OnGpu, LargeSixteenBitProductsWithAnOddWidthMatchTheCpu) {
  const Device g = Device::cuda(0);
  const Tensor x = random({256, 768}, DType::bf16, 4), w = random({1025, 768}, DType::bf16, 5),
               dy = random({256, 1025}, DType::bf16, 6), b = random({1025}, DType::bf16, 7);
  const auto expect_near = [](const Tensor& got, const Tensor& want, const char* what) {
    ASSERT_EQ(got.shape(), want.shape()) << what;
    const auto gv = got.to_vector(), wv = want.to_vector();
    size_t bad = 0;
    for (size_t i = 0; i < wv.size(); ++i) bad += !(std::fabs(gv[i] - wv[i]) <= 2e-2f * (1 + std::fabs(wv[i])));
    EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << wv.size() << " elements differ from the cpu's";
  };
  const Tensor bg = b.to(g);
  expect_near(ops::linear(x.to(g), w.to(g), nullptr), ops::linear(x, w, nullptr), "x w^T");
  expect_near(ops::linear(x.to(g), w.to(g), &bg), ops::linear(x, w, &b), "x w^T + b");
  expect_near(ops::matmul(dy.to(g), w.to(g)), ops::matmul(dy, w), "dy w");
  expect_near(ops::matmul(dy.to(g), x.to(g), true, false), ops::matmul(dy, x, true, false), "dy^T x");
}

// Note [weight gradients in row blocks] on the GPU: strided column blocks of dy, added into a
// bf16 slot and an f32 one, as on the CPU.
TEST_F(OnGpu, AWeightGradientInRowBlocksMatchesTheCpu) {
  const Device g = Device::cuda(0);
  const int64_t rows = 2 * ops::kGradRowBlock + 77;
  const Tensor dy = random({64, rows}, DType::bf16, 8), x = random({64, 96}, DType::bf16, 9);
  for (DType slot_dt : {DType::bf16, DType::f32}) {
    Tensor cpu = Tensor::zeros({rows, 96}, slot_dt), gpu = Tensor::zeros({rows, 96}, slot_dt, g);
    ops::add_linear_weight_grad(cpu, dy, x);
    ops::add_linear_weight_grad(gpu, dy.to(g), x.to(g));
    const auto gv = gpu.to_vector(), wv = cpu.to_vector();
    size_t bad = 0;
    for (size_t i = 0; i < wv.size(); ++i) bad += !(std::fabs(gv[i] - wv[i]) <= 2e-2f * (1 + std::fabs(wv[i])));
    EXPECT_EQ(bad, 0u) << dtype_name(slot_dt) << ": " << bad << " of " << wv.size() << " elements differ";
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
