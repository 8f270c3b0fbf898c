// Note [copy stream]: a copy on a device's copy stream follows the work queued on its compute
// stream before it, the host does not wait for it, and the compute stream's later work (or the
// host, for a download) sees it once told to wait; on sim always, on a GPU where one is present.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

#include "../common/error_of.h"
#include "zt/core/allocator.h"
#include "zt/core/copy_stream.h"
#include "zt/core/sim_device.h"
#include "zt/ops/ops.h"

namespace zt {
namespace {

std::vector<Device> devices() {
  std::vector<Device> d{Device::sim()};
  if (cuda_device_count() > 0) d.push_back(Device::cuda(0));
  return d;
}

Tensor pinned_iota(int64_t n) {
  Tensor t = Tensor::empty_pinned({n}, DType::f32, MemTag::activation);
  float* p = t.data<float>();
  for (int64_t i = 0; i < n; ++i) p[i] = float(i % 4096);
  return t;
}

TEST(CopyStream, TheComputeWorkThatWaitsForAnUploadSeesAllOfIt) {
  const int64_t n = int64_t(16) << 20;  // 64 MiB: long enough to copy that an unordered read shows
  const Tensor src = pinned_iota(n);
  for (const Device d : devices()) {
    SCOPED_TRACE(d.str());
    Tensor dst = Tensor::empty({n}, DType::f32, MemTag::activation, d);
    const CopyEvent landed = copy_on_copy_stream(dst, src);
    ASSERT_TRUE(landed.defined());
    EXPECT_EQ(landed.device(), d);
    landed.make_compute_wait();
    ops::scale_(dst, 2.f);
    const std::vector<float> got = dst.to_vector();
    int64_t wrong = 0;
    for (int64_t i = 0; i < n; ++i) wrong += got[size_t(i)] != 2.f * float(i % 4096);
    EXPECT_EQ(wrong, 0);
    landed.synchronize();
  }
}

// The destination block may be one that queued work still writes (a block freed by the compute
// stream's work is handed out again at once): the upload runs after that work.
TEST(CopyStream, AnUploadRunsAfterTheComputeWorkQueuedBeforeItAndTheHostGoesOn) {
  Tensor dst = Tensor::zeros({1024}, DType::f32, Device::sim());
  synchronize(Device::sim());
  sim::enqueue([] { std::this_thread::sleep_for(std::chrono::milliseconds(200)); });
  dst.fill_(7.f);  // staged through the host: a copy queued behind the sleep
  const Tensor src = pinned_iota(1024);
  const CopyEvent landed = copy_on_copy_stream(dst, src);
  const float* view = static_cast<const float*>(sim::host_view(dst.raw_data()));
  EXPECT_EQ(view[5], 0.f) << "the upload landed while the work before it was still queued";
  landed.synchronize();
  EXPECT_EQ(view[5], 5.f);
  synchronize(Device::sim());
  EXPECT_EQ(dst.to_vector()[5], 5.f) << "the work queued before the upload ran after it";
}

// A download (a gradient shard coming down during backward) reads what the compute work queued
// before it wrote, and the host sees it once it waits for the event.
TEST(CopyStream, ADownloadReadsWhatTheComputeWorkBeforeItWrote) {
  const int64_t n = int64_t(1) << 20;
  const Tensor src = pinned_iota(n);
  for (const Device d : devices()) {
    SCOPED_TRACE(d.str());
    Tensor dev = src.to(d);
    synchronize(d);
    if (d.type == DeviceType::sim) sim::enqueue([] { std::this_thread::sleep_for(std::chrono::milliseconds(100)); });
    ops::scale_(dev, 3.f);
    Tensor host = Tensor::empty_pinned({n}, DType::f32, MemTag::activation);
    const CopyEvent landed = copy_on_copy_stream(host, dev);
    landed.synchronize();
    const float* h = host.data<float>();
    int64_t wrong = 0;
    for (int64_t i = 0; i < n; ++i) wrong += h[i] != 3.f * float(i % 4096);
    EXPECT_EQ(wrong, 0);
  }
}

TEST(CopyStream, TwoHostTensorsAreAPlainCopyAndMismatchedTensorsAreOneError) {
  Tensor dst = Tensor::zeros({4});
  const CopyEvent e = copy_on_copy_stream(dst, pinned_iota(4));
  EXPECT_FALSE(e.defined());
  EXPECT_EQ(dst.to_vector(), (std::vector<float>{0, 1, 2, 3}));
  Tensor small = Tensor::empty({3}, DType::f32, MemTag::activation, Device::sim());
  const std::string err = testing_util::error_of([&] { copy_on_copy_stream(small, pinned_iota(4)); });
  EXPECT_NE(err.find("[core] copy_on_copy_stream takes"), std::string::npos) << err;
}

}  // namespace
}  // namespace zt
