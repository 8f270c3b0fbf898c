// The tagged caching allocator: per-tag current/peak bytes, reuse of freed blocks (steady
// state allocates nothing new from the system), and budget errors with a breakdown.
#include <gtest/gtest.h>

#include <sstream>
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
    for (size_t bytes : {100u, 4096u, 70000u, 3u << 20, 100u}) live.push_back(a.allocate(bytes, MemTag::activation));
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
    EXPECT_EQ(e.kind(), ErrorKind::out_of_memory);
    EXPECT_NE(m.find("[memory] out of budget"), std::string::npos) << m;
    EXPECT_NE(m.find("exceed the budget of"), std::string::npos) << m;
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

TEST(Allocator, GlobalIsTheCpuAllocator) {
  EXPECT_EQ(&Allocator::global(), &allocator_for(Device::cpu()));
  EXPECT_EQ(Allocator::global().device(), Device::cpu());
  EXPECT_EQ(Allocator::global().name(), "cpu");
  auto s = Allocator::global().allocate(10, MemTag::param);
  EXPECT_EQ(s->device(), Device::cpu());
  EXPECT_FALSE(is_pinned(*s));
}

TEST(Allocator, CudaIsNotAvailableInACpuBuild) {
  EXPECT_FALSE(is_available(Device::cuda(0)));
  EXPECT_TRUE(is_available(Device::cpu()));
  try {
    allocator_for(Device::cuda(0));
    ADD_FAILURE() << "expected cuda:0 to be unavailable";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("[core] device cuda:0 is not available in this build"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(Tensor::empty({2}, DType::f32, Device::cuda(1)), Error);
}

TEST(Allocator, OnlyCpuIndexZeroExists) {
  EXPECT_FALSE(is_available(Device{DeviceType::cpu, 1}));
  try {
    allocator_for(Device{DeviceType::cpu, 1});
    ADD_FAILURE() << "expected cpu:1 to be rejected";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("device cpu:1 does not exist"), std::string::npos) << e.what();
  }
}

TEST(Allocator, PinnedHostKeepsItsOwnStats) {
  auto& pin = pinned_host_allocator();
  auto& cpu = Allocator::global();
  EXPECT_NE(&pin, &cpu);
  EXPECT_EQ(pin.device(), Device::cpu());  // pinned memory is host memory
  EXPECT_EQ(pin.name(), "pinned host");
  const MemStats p0 = pin.stats(), c0 = cpu.stats();
  pin.reset_peaks();
  {
    auto s = pin.allocate(3000, MemTag::optim);
    EXPECT_TRUE(is_pinned(*s));
    EXPECT_EQ(s->device(), Device::cpu());
    EXPECT_EQ(reinterpret_cast<uintptr_t>(s->data()) % 64, 0u);
    EXPECT_EQ(pin.stats().of(MemTag::optim), p0.of(MemTag::optim) + 3000);
    EXPECT_EQ(pin.stats().alloc_calls, p0.alloc_calls + 1);
  }
  EXPECT_EQ(pin.stats().of(MemTag::optim), p0.of(MemTag::optim));
  EXPECT_EQ(pin.stats().peak_of(MemTag::optim), p0.of(MemTag::optim) + 3000);
  EXPECT_GT(pin.stats().cached, 0u);
  const MemStats c1 = cpu.stats();
  EXPECT_EQ(c1.alloc_calls, c0.alloc_calls);
  EXPECT_EQ(c1.of(MemTag::optim), c0.of(MemTag::optim));
  auto again = pin.allocate(3000, MemTag::master);  // reuses the cached block
  EXPECT_EQ(pin.stats().system_allocs, p0.system_allocs + 1);
}

TEST(Allocator, PinnedHostBudgetIsSeparateAndNamed) {
  auto& pin = pinned_host_allocator();
  pin.release_cached();
  const size_t base = pin.stats().total_current;
  pin.set_budget(base + (64u << 10));
  EXPECT_EQ(Allocator::global().budget(), 0u);
  auto fits = pin.allocate(60u << 10, MemTag::optim);
  auto cpu_block = Allocator::global().allocate(1u << 20, MemTag::optim);  // cpu budget unaffected
  try {
    auto big = pin.allocate(8u << 10, MemTag::optim);
    ADD_FAILURE() << "expected an out-of-budget error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_EQ(e.kind(), ErrorKind::out_of_memory);
    EXPECT_NE(m.find("[memory] out of budget"), std::string::npos) << m;
    EXPECT_NE(m.find("exceed the pinned host budget of 64.0KiB"), std::string::npos) << m;
    EXPECT_NE(m.find("optim=60.0KiB"), std::string::npos) << m;
  }
  pin.set_budget(0);
}

TEST(Allocator, ACachingAllocatorCanServeAnotherDevice) {
  // Host memory labelled cuda:0: how tests reach device-mismatch checks in a CPU-only build.
  CachingAllocator fake(Device::cuda(0), "fake cuda:0", host_system_memory());
  EXPECT_EQ(fake.name(), "fake cuda:0");
  {
    auto s = fake.allocate(100, MemTag::param);
    EXPECT_EQ(s->device(), Device::cuda(0));
    EXPECT_EQ(&s->allocator(), &fake);
    EXPECT_EQ(fake.stats().of(MemTag::param), 100u);
  }
  EXPECT_EQ(fake.stats().total_current, 0u);
  EXPECT_EQ(fake.stats().cached, 64u * 2);
  fake.release_cached();
  EXPECT_EQ(fake.stats().cached, 0u);
}

TEST(Device, PrintsAsTypeAndIndex) {
  EXPECT_EQ(Device::cpu().str(), "cpu");
  EXPECT_EQ(Device::cuda(0).str(), "cuda:0");
  EXPECT_EQ(Device::cuda(3).str(), "cuda:3");
  std::ostringstream os;
  os << Device::cuda(1) << ' ' << Device::cpu();
  EXPECT_EQ(os.str(), "cuda:1 cpu");
  EXPECT_EQ(Device(), Device::cpu());
  EXPECT_NE(Device::cuda(0), Device::cuda(1));
  EXPECT_NE(Device::cuda(0), Device::cpu());
}

}  // namespace
}  // namespace zt
