// Placement: tensors know their device; rebind/release_storage (how ZeRO binds parameters into
// flat buffers) check their invariants; data<T>() checks the dtype.
#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "zt/core/tensor.h"

namespace zt {
namespace {

// Expects `fn` to throw a zt::Error of `kind` whose message contains every one of `parts`.
template <typename Fn>
void expect_error(Fn&& fn, ErrorKind kind, std::initializer_list<const char*> parts) {
  try {
    fn();
    ADD_FAILURE() << "expected an error containing " << *parts.begin();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    for (const char* p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

// A cuda:0 storage made of host memory, so device checks are reachable in a CPU-only build.
CachingAllocator& fake_cuda() {
  static CachingAllocator* a = new CachingAllocator(Device::cuda(0), "fake cuda:0", host_system_memory());
  return *a;
}

TEST(Placement, FactoriesDefaultToCpuAndViewsKeepTheDevice) {
  Tensor a = Tensor::zeros({2, 3});
  EXPECT_EQ(a.device(), Device::cpu());
  EXPECT_EQ(a.storage()->device(), Device::cpu());
  EXPECT_EQ(Tensor::empty({4}, DType::bf16, MemTag::grad, Device::cpu()).device(), Device::cpu());
  EXPECT_EQ(Tensor::from_ints({1, 2}, {2}, Device::cpu()).device(), Device::cpu());
  EXPECT_EQ(a.transpose(0, 1).device(), Device::cpu());
  EXPECT_EQ(a.clone().device(), Device::cpu());

  Tensor d = Tensor::view_of(fake_cuda().allocate(64, MemTag::param), 2, {2, 3}, DType::bf16);
  EXPECT_EQ(d.device(), Device::cuda(0));
  EXPECT_EQ(d.slice(1, 0, 2).device(), Device::cuda(0));
  EXPECT_EQ(d.view({6}).device(), Device::cuda(0));
}

// Note [device copies]: copies, fills and reads of a device tensor go through the device's hooks,
// which a build without CUDA answers with one line (a CUDA build's are tested on a GPU).
TEST(Placement, DeviceCopiesGoThroughTheDeviceHooks) {
  if (cuda_device_count() > 0) GTEST_SKIP() << "a GPU is present: tests/ops/device_seam_test.cpp copies for real";
  Tensor d = Tensor::view_of(fake_cuda().allocate(64, MemTag::param), 0, {4}, DType::f32);
  Tensor h = Tensor::zeros({4});
  for (auto fn : std::initializer_list<std::function<void()>>{
           [&] { d.fill_(1.f); }, [&] { d.zero_(); }, [&] { d.to_vector(); }, [&] { h.copy_(d); }, [&] { d.copy_(h); },
           [&] { d.to(Device::cpu()); }, [&] { h.to(Device::cuda(0)); }})
    expect_error(fn, ErrorKind::invalid_argument, {"device cuda:0 is not available"});
  EXPECT_NE(d.raw_data(), nullptr);  // a device kernel still gets its pointer
  EXPECT_TRUE(h.to(Device::cpu()).same(h));
}

TEST(Placement, RebindMakesAContiguousViewAtTheOffset) {
  Tensor flat = Tensor::from_vector({0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, {10});
  Tensor p = Tensor::zeros({3, 2}).transpose(0, 1);  // shape [2, 3], strided
  ASSERT_FALSE(p.is_contiguous());
  Tensor handle = p;  // another handle on the same impl (a module's parameter)
  p.rebind(flat.storage(), 3);
  EXPECT_TRUE(handle.is_contiguous());
  EXPECT_EQ(handle.shape(), (Shape{2, 3}));
  EXPECT_EQ(handle.offset(), 3);
  EXPECT_EQ(handle.storage(), flat.storage());
  EXPECT_EQ(handle.to_vector(), (std::vector<float>{3, 4, 5, 6, 7, 8}));
  handle.fill_(-1.f);  // writes land in the flat buffer
  EXPECT_EQ(flat.to_vector(), (std::vector<float>{0, 1, 2, -1, -1, -1, -1, -1, -1, 9}));
  p.rebind(flat.storage(), 4);  // the last element that fits: [4, 10)
  EXPECT_EQ(p.to_vector()[5], 9.f);
}

TEST(Placement, RebindChecksItsInvariants) {
  Tensor flat = Tensor::zeros({10});  // 40 bytes
  Tensor p = Tensor::zeros({2, 3});
  expect_error([&] { p.rebind(nullptr, 0); }, ErrorKind::invalid_argument, {"[rebind] storage is null"});
  expect_error([&] { p.rebind(flat.storage(), -1); }, ErrorKind::invalid_argument, {"[rebind] negative offset -1"});
  expect_error([&] { p.rebind(flat.storage(), 5); }, ErrorKind::invalid_argument,
               {"[rebind] elements [5, 11) of f32 do not fit in a storage of 40 bytes (10 elements)"});
  expect_error([&] { p.rebind(flat.storage(), 11); }, ErrorKind::invalid_argument, {"do not fit"});
  // The bound is in the tensor's dtype: 6 bf16 fit in 12 bytes where 6 f32 do not.
  auto bytes12 = Allocator::global().allocate(12, MemTag::param);
  expect_error([&] { p.rebind(bytes12, 0); }, ErrorKind::invalid_argument, {"do not fit"});
  Tensor h = Tensor::zeros({2, 3}, DType::bf16);
  h.rebind(bytes12, 0);
  EXPECT_EQ(h.storage(), bytes12);
  expect_error([&] { h.rebind(bytes12, 1); }, ErrorKind::invalid_argument, {"of bf16 do not fit"});
  expect_error([&] { p.rebind(fake_cuda().allocate(64, MemTag::param), 0); }, ErrorKind::invalid_argument,
               {"[rebind] storage is on cuda:0 but the tensor is on cpu"});
  expect_error([] { Tensor().rebind(nullptr, 0); }, ErrorKind::invalid_argument, {"undefined"});
  // A failed rebind leaves the tensor as it was.
  EXPECT_NE(p.storage(), flat.storage());
  EXPECT_EQ(p.offset(), 0);
}

TEST(Placement, ReleaseStorageKeepsShapeDtypeAndDevice) {
  Tensor flat = Tensor::from_vector({1, 2, 3, 4}, {4});
  Tensor p = Tensor::zeros({2}, DType::f32);
  p.rebind(flat.storage(), 2);
  p.release_storage();
  EXPECT_FALSE(p.has_storage());
  EXPECT_EQ(p.shape(), (Shape{2}));
  EXPECT_EQ(p.dtype(), DType::f32);
  EXPECT_EQ(p.device(), Device::cpu());
  EXPECT_EQ(flat.storage().use_count(), 1);  // the flat buffer is no longer held by p
  expect_error([&] { p.raw_data(); }, ErrorKind::invalid_argument, {"no storage"});
  expect_error([&] { p.to_vector(); }, ErrorKind::invalid_argument, {"no storage"});
  expect_error([&] { p.copy_(Tensor::zeros({2})); }, ErrorKind::invalid_argument, {"no storage"});
  p.rebind(flat.storage(), 1);  // re-gathered
  EXPECT_EQ(p.to_vector(), (std::vector<float>{2, 3}));
  Tensor d = Tensor::view_of(fake_cuda().allocate(64, MemTag::param), 0, {2}, DType::f32);
  d.release_storage();
  EXPECT_EQ(d.device(), Device::cuda(0));  // so a later rebind is still checked
  expect_error([&] { d.rebind(flat.storage(), 0); }, ErrorKind::invalid_argument, {"is on cpu"});
}

TEST(Placement, ViewOfChecksBounds) {
  auto st = Allocator::global().allocate(40, MemTag::grad);
  EXPECT_EQ(Tensor::view_of(st, 6, {2, 2}, DType::f32).offset(), 6);
  expect_error(
      [&] {
        Tensor::view_of(st, 7, {2, 2}, DType::f32);
      },
      ErrorKind::invalid_argument, {"[view_of] elements [7, 11)"});
  expect_error([&] { Tensor::view_of(st, -2, {2}, DType::f32); }, ErrorKind::invalid_argument, {"negative offset"});
  expect_error([&] { Tensor::view_of(nullptr, 0, {2}, DType::f32); }, ErrorKind::invalid_argument, {"storage is null"});
}

TEST(Placement, DataChecksTheDtype) {
  EXPECT_NE(Tensor::zeros({2}).data<float>(), nullptr);
  EXPECT_NE(Tensor::zeros({2}, DType::bf16).data<bf16>(), nullptr);
  EXPECT_NE(Tensor::zeros({2}, DType::f16).data<f16>(), nullptr);
  EXPECT_NE(Tensor::zeros({2}, DType::i32).data<int32_t>(), nullptr);
  EXPECT_NE(Tensor::zeros({2}, DType::i64).data<int64_t>(), nullptr);
  const Tensor c = Tensor::zeros({2});
  EXPECT_EQ(c.data<const float>(), c.data<float>());
  expect_error([] { Tensor::zeros({2}).data<bf16>(); }, ErrorKind::invalid_argument,
               {"[tensor] data<bf16>() on a tensor of dtype f32"});
  expect_error([] { Tensor::zeros({2}, DType::bf16).data<float>(); }, ErrorKind::invalid_argument,
               {"data<f32>() on a tensor of dtype bf16"});
  expect_error([] { Tensor::zeros({2}, DType::bf16).data<f16>(); }, ErrorKind::invalid_argument,
               {"data<f16>() on a tensor of dtype bf16"});
  expect_error([] { Tensor::zeros({2}, DType::i64).data<int32_t>(); }, ErrorKind::invalid_argument,
               {"data<i32>() on a tensor of dtype i64"});
  expect_error([] { Tensor::zeros({2}, DType::i32).data<int64_t>(); }, ErrorKind::invalid_argument,
               {"data<i64>() on a tensor of dtype i32"});
  Tensor b = Tensor::zeros({2}, DType::bf16);
  EXPECT_EQ(b.raw_data(), static_cast<void*>(b.data<bf16>()));  // raw_data is unchecked
}

}  // namespace
}  // namespace zt

namespace zt {
TEST(Placement, RebindCanChangeTheDtypeAndChecksTheNewSize) {
  Tensor p = Tensor::zeros({4, 3});
  Tensor flat = Tensor::zeros({12}, DType::bf16);
  p.rebind(flat.storage(), 0, DType::bf16);
  EXPECT_EQ(p.dtype(), DType::bf16);
  EXPECT_EQ(p.data<bf16>(), flat.data<bf16>());
  Tensor small = Tensor::zeros({11}, DType::bf16);
  EXPECT_THROW(p.rebind(small.storage(), 0, DType::f32), Error);
  EXPECT_EQ(p.dtype(), DType::bf16);  // unchanged by the failed call
}
}  // namespace zt
