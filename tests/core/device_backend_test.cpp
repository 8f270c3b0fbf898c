// The device backend table (Note [device backend table]): every device type has one entry, named
// as Device::str names it, and the core's device calls go through it (copies across types included).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backend.h"
#include "zt/core/device_capacity.h"
#include "zt/core/error.h"
#include "zt/core/tensor.h"

namespace zt {
namespace {

const std::vector<std::pair<DeviceType, std::string>> kTypes = {
    {DeviceType::cpu, "cpu"}, {DeviceType::cuda, "cuda"}, {DeviceType::sim, "sim"}, {DeviceType::meta, "meta"}};

TEST(DeviceBackend, EveryTypeHasAnEntryWithItsName) {
  for (const auto& [t, name] : kTypes) {
    const detail::DeviceBackend& b = detail::backend_of(t);
    EXPECT_EQ(b.name, name);
    EXPECT_STREQ(device_type_name(t), name.c_str());
    EXPECT_EQ(Device({t, 1}).str(), name + ":1");
    for (const void* f :
         {(const void*)b.available, (const void*)b.allocator, (const void*)b.stream, (const void*)b.synchronize,
          (const void*)b.copy, (const void*)b.memset, (const void*)b.capacity, (const void*)b.set_current})
      EXPECT_NE(f, nullptr) << name;
    const bool stream = b.copy_async != nullptr;  // the copy stream's three go together
    EXPECT_EQ(b.compute_waits != nullptr, stream) << name;
    EXPECT_EQ(b.event_synchronize != nullptr, stream) << name;
  }
  EXPECT_EQ(detail::backend_of(DeviceType::sim).copy_async != nullptr, true);
  EXPECT_EQ(detail::backend_of(DeviceType::meta).copy_async, nullptr);
}

TEST(DeviceBackend, TypesWithOneDeviceHaveIndexZeroOnly) {
  for (DeviceType t : {DeviceType::cpu, DeviceType::sim, DeviceType::meta}) {
    EXPECT_TRUE(is_available({t, 0}));
    EXPECT_FALSE(is_available({t, 1}));
    EXPECT_EQ(&allocator_for({t, 0}), &detail::backend_of(t).allocator(0));
    const std::string name = device_type_name(t);
    try {
      allocator_for({t, 2});
      ADD_FAILURE() << name << ":2 has an allocator";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()),
                "[core] device " + name + ":2 does not exist (there is one " + name + " device, index 0)");
    }
  }
  EXPECT_EQ(device_stream(Device::cpu()), nullptr);
  EXPECT_EQ(device_stream(Device::meta()), nullptr);
  EXPECT_NE(device_stream(Device::sim()), nullptr);
  EXPECT_EQ(device_capacity(Device::cpu()), 0u);
  EXPECT_EQ(device_capacity(Device::meta()), size_t(1) << 62);
}

TEST(DeviceBackend, ACopyAcrossDeviceTypesIsTheLaterTypes) {
  Tensor s = Tensor::zeros({4}, DType::f32, Device::sim());
  float host[4] = {1, 2, 3, 4};
  // sim and cuda: sim's, which refuses (cuda memory is not the sim's), in both directions
  for (const auto& [dst, src] : {std::pair{Device::sim(), Device::cuda()}, std::pair{Device::cuda(), Device::sim()}}) {
    try {
      detail::device_copy(s.raw_data(), dst, host, src, sizeof host);
      ADD_FAILURE() << "copied " << src << " to " << dst;
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()),
                "[core] no copy between " + src.str() + " and " + dst.str() + ": stage through the host");
    }
  }
  // meta and anything: meta's, which moves nothing and gives a host destination zeros
  detail::device_copy(host, Device::cpu(), nullptr, Device::meta(), sizeof host);
  EXPECT_EQ(host[0], 0.f);
  EXPECT_EQ(host[3], 0.f);
  EXPECT_NO_THROW(detail::device_copy(s.raw_data(), Device::sim(), nullptr, Device::meta(), sizeof host));
  synchronize(Device::sim());
}

}  // namespace
}  // namespace zt
