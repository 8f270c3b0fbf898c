// Note [residence]: the memory tier, whole tensors on the compute device or in pinned host memory.
#include <cstring>

#include "residence.h"

namespace zt::zero {
namespace {

class MemoryResidence final : public ShardResidence {
 public:
  MemoryResidence(int64_t numel, Device device, std::vector<Tensor> tensors)
      : numel_(numel), device_(device), tensors_(std::move(tensors)) {}

  int64_t numel() const override { return numel_; }
  Device device() const override { return device_; }

  void visit(const TileFn& fn, const TileFn&) override { fn(0, numel_, tensors_); }

  ShardTensor tensor(size_t j, const std::string& name) override {
    return ShardTensor::in_memory(name, tensors_.at(j));
  }

  // Through a host copy where the tensors are a device's.
  void start_read(void* dst) override {
    const Tensor host = tensors_.at(0).to(Device::cpu());
    std::memcpy(dst, host.raw_data(), host.nbytes());
  }
  void finish_read() override {}
  void write_whole(const void* src) override {
    Tensor host = Tensor::empty(tensors_.at(0).shape(), tensors_[0].dtype());
    std::memcpy(host.raw_data(), src, host.nbytes());
    tensors_[0].copy_(host);
  }

 private:
  int64_t numel_;
  Device device_;
  std::vector<Tensor> tensors_;
};

}  // namespace

std::unique_ptr<ShardResidence> memory_residence(int64_t numel, Device device, std::vector<Tensor> tensors) {
  return std::make_unique<MemoryResidence>(numel, device, std::move(tensors));
}

}  // namespace zt::zero
