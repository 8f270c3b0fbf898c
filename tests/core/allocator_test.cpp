// The tagged caching allocator: per-tag current/peak bytes, reuse of freed blocks (steady
// state allocates nothing new from the system), and budget errors with a breakdown.
#include <gtest/gtest.h>

#include <vector>

#include "zt/core/allocator.h"
#include "zt/core/tensor.h"

namespace zt {
namespace {

TEST(Allocator, PerTagCurrentAndPeak) {
  auto& a = Allocator::global();
  const MemStats s0 = a.stats();
  a.reset_peaks();
  {
    auto p = a.allocate(1000, MemTag::param);
    auto g = a.allocate(300, MemTag::grad);
    MemStats s = a.stats();
    EXPECT_EQ(s.of(MemTag::param), s0.of(MemTag::param) + 1000);  // exact requested bytes
    EXPECT_EQ(s.of(MemTag::grad), s0.of(MemTag::grad) + 300);
    EXPECT_EQ(s.total_current, s0.total_current + 1300);
    EXPECT_EQ(p->tag(), MemTag::param);
    EXPECT_EQ(p->bytes(), 1000u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p->data()) % 64, 0u);
  }
  MemStats s = a.stats();
  EXPECT_EQ(s.of(MemTag::param), s0.of(MemTag::param));
  EXPECT_GE(s.peak_of(MemTag::param), s0.of(MemTag::param) + 1000);
  EXPECT_GE(s.total_peak, s0.total_current + 1300);
  a.reset_peaks();
  EXPECT_EQ(a.stats().peak_of(MemTag::param), a.stats().of(MemTag::param));
}

TEST(Allocator, TensorsUseTheCurrentTag) {
  auto& a = Allocator::global();
  const size_t before = a.stats().of(MemTag::optim);
  {
    TagScope scope(MemTag::optim);
    EXPECT_EQ(current_tag(), MemTag::optim);
    Tensor t = Tensor::empty({10, 10});
    EXPECT_EQ(t.storage()->tag(), MemTag::optim);
    EXPECT_EQ(a.stats().of(MemTag::optim), before + 400);
    Tensor c = t.clone(MemTag::comm);
    EXPECT_EQ(c.storage()->tag(), MemTag::comm);
  }
  EXPECT_EQ(current_tag(), MemTag::activation);
  EXPECT_EQ(a.stats().of(MemTag::optim), before);
}

TEST(Allocator, SteadyStateReusesFreedBlocks) {
  auto& a = Allocator::global();
  auto step = [&] {
    std::vector<std::shared_ptr<Storage>> live;
    for (size_t bytes : {100u, 4096u, 70000u, 3u << 20, 100u})
      live.push_back(a.allocate(bytes, MemTag::activation));
    live.pop_back();
    live.push_back(a.allocate(5000, MemTag::workspace));
  };
  step();  // warm-up fills the cache
  const size_t sys = a.stats().system_allocs, calls = a.stats().alloc_calls;
  for (int i = 0; i < 5; ++i) step();
  EXPECT_EQ(a.stats().system_allocs, sys);
  EXPECT_EQ(a.stats().alloc_calls, calls + 5 * 6);
  EXPECT_GT(a.stats().cached, 0u);
}

TEST(Allocator, BudgetErrorHasBreakdown) {
  auto& a = Allocator::global();
  a.release_cached();
  const size_t base = a.stats().total_current;
  a.set_budget(base + (1u << 20));
  auto held = a.allocate(512 << 10, MemTag::param);
  try {
    auto big = a.allocate(1u << 20, MemTag::activation);
    ADD_FAILURE() << "expected an out-of-budget error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("[memory] out of budget"), std::string::npos) << m;
    EXPECT_NE(m.find("param=512.0KiB"), std::string::npos) << m;
    EXPECT_NE(m.find("'activation'"), std::string::npos) << m;
    EXPECT_NE(m.find("total="), std::string::npos) << m;
  }
  // Cached blocks are released to make room before giving up.
  held.reset();
  EXPECT_GT(a.stats().cached, 0u);
  auto fits = a.allocate(900 << 10, MemTag::grad);
  EXPECT_EQ(a.stats().cached, 0u);
  fits.reset();
  a.set_budget(0);
  EXPECT_EQ(a.budget(), 0u);
}

}  // namespace
}  // namespace zt
