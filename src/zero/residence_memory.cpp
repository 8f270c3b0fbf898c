// Note [residence]: the memory tier, whole tensors on the compute device (or, through
// optimizer_buffer_in_memory, in any tier's memory: Note [residence tiers]).
#include <cstring>

#include "residence.h"
#include "zt/ops/ops.h"

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

std::unique_ptr<ShardResidence> optimizer_buffer_in_memory(const ResidenceTier& tier, const OptimBuffer& a,
                                                           Device device) {
  const Device compute = a.plan.policy.device;
  std::vector<Tensor> t;
  for (size_t j = 0; j < a.count; ++j) {
    const MemTag tag = a.master && j == 0 ? MemTag::master : MemTag::optim;
    TagScope scope(tag);  // the initial values' copy too
    t.push_back(tier.zeros(a.n, DType::f32, compute, tag));
    if (tag == MemTag::master) t.back().copy_(a.initial());  // converts; from a device, through a host copy
  }
  return memory_residence(a.n, device, std::move(t));
}

namespace {
Tensor zeros_on_compute(int64_t n, DType dtype, Device compute, MemTag tag) {
  TagScope scope(tag);
  return Tensor::zeros({n}, dtype, compute);
}
// The master converted where it is (a device's cast runs there).
std::unique_ptr<ShardResidence> memory_optimizer_buffer(const OptimBuffer& a) {
  const Device d = a.plan.policy.device;
  std::vector<Tensor> t;
  if (a.master) {
    TagScope tag(MemTag::master);
    t.push_back(ops::cast(a.initial(), DType::f32));
  }
  TagScope tag(MemTag::optim);
  while (t.size() < a.count) t.push_back(Tensor::zeros({a.n}, DType::f32, d));
  return memory_residence(a.n, d, std::move(t));
}
}  // namespace

const ResidenceTier& memory_tier() {
  static const ResidenceTier t{.name = "the compute device's memory",
                               .offload_device = "none",
                               .medium = Medium::compute,
                               .zeros = &zeros_on_compute,
                               .optimizer_buffer = &memory_optimizer_buffer};
  return t;
}

}  // namespace zt::zero
