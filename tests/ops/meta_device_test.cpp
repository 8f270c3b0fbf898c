// The meta device (Note [meta device] in src/core/meta.cpp): it counts what ops allocate, with the
// caching allocator's classes and tags, stores nothing, and gives the host zeros.
#include <gtest/gtest.h>

#include <vector>

#include "zt/core/allocator.h"
#include "zt/ops/ops.h"
#include "zt/ops/transformer.h"

namespace zt::test {
namespace {

TEST(MetaDevice, AllocatesAnySizeStoresNothingAndReadsBackZeros) {
  Allocator& meta = allocator_for(Device::meta());
  EXPECT_TRUE(is_available(Device::meta()));
  EXPECT_EQ(Device::meta().str(), "meta:0");
  const size_t before = meta.stats().of(MemTag::param);
  {
    TagScope tag(MemTag::param);
    // A petabyte of f32: address space only, never reserved.
    Tensor huge = Tensor::empty({int64_t(1) << 48}, DType::f32, Device::meta());
    EXPECT_EQ(meta.stats().of(MemTag::param) - before, size_t(1) << 50);
  }
  EXPECT_EQ(meta.stats().of(MemTag::param), before);
  const Tensor up = Tensor::from_vector({1.f, 2.f, 3.f}, {3}).to(Device::meta());
  EXPECT_EQ(up.to_vector(), std::vector<float>(3, 0.f));  // nothing went up
}

TEST(MetaDevice, OpsAllocateTheirOutputsAndComputeNothing) {
  Allocator& meta = allocator_for(Device::meta());
  meta.release_cached();
  meta.reset_peaks();
  const Tensor a = Tensor::zeros({64, 32}, DType::bf16).to(Device::meta());
  const Tensor b = Tensor::zeros({32, 16}, DType::bf16).to(Device::meta());
  const size_t in_use = meta.stats().of(MemTag::activation);
  Tensor c = ops::matmul(a, b);
  EXPECT_EQ(c.device(), Device::meta());
  EXPECT_EQ(c.shape(), (Shape{64, 16}));
  EXPECT_EQ(meta.stats().of(MemTag::activation) - in_use, size_t(64 * 16 * 2));
  const auto r = ops::rms_norm(a, Tensor::zeros({32}, DType::bf16).to(Device::meta()), 1e-6f);
  EXPECT_EQ(r.rstd.shape(), Shape{64});
  EXPECT_EQ(ops::sum_of_squares(a), 0.0);  // a value the host asks for is zero
}

// A tag's resident peak: its bytes in use plus the blocks it freed that the cache keeps.
TEST(MetaDevice, ATagsResidentPeakCountsTheBlocksItFreed) {
  Allocator& meta = allocator_for(Device::meta());
  meta.release_cached();
  meta.reset_peaks();
  const size_t base = meta.stats().resident_peak[size_t(MemTag::activation)];
  { Tensor x = Tensor::empty({4096}, DType::f32, MemTag::activation, Device::meta()); }  // freed, cached
  { Tensor y = Tensor::empty({8192}, DType::f32, MemTag::activation, Device::meta()); }  // another class
  const MemStats s = meta.stats();
  EXPECT_EQ(s.of(MemTag::activation), base);
  EXPECT_EQ(s.cached_by[size_t(MemTag::activation)], size_t(4096 + 8192) * 4);
  EXPECT_EQ(s.resident_peak[size_t(MemTag::activation)], base + size_t(4096 + 8192) * 4);
  { Tensor z = Tensor::empty({4096}, DType::f32, MemTag::comm, Device::meta()); }  // reuses x's block
  EXPECT_EQ(meta.stats().cached_by[size_t(MemTag::activation)], size_t(8192) * 4);
  EXPECT_EQ(meta.stats().cached_by[size_t(MemTag::comm)], size_t(4096) * 4);
}

}  // namespace
}  // namespace zt::test
