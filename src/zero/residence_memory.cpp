// Note [residence]: the memory tier, whole tensors on the compute device or tiles of pinned ones.
#include <algorithm>

#include "residence.h"

namespace zt::zero {
namespace {

class MemoryResidence final : public ShardResidence {
 public:
  MemoryResidence(int64_t numel, Device device, std::vector<Tensor> tensors, int64_t tile)
      : numel_(numel), device_(device), tensors_(std::move(tensors)), tile_(tile) {}

  int64_t numel() const override { return numel_; }
  Device device() const override { return device_; }

  void visit(const TileFn& fn, const TileFn&) override {
    if (tile_ <= 0) return fn(0, numel_, tensors_);
    std::vector<Tensor> views(tensors_.size());
    for (int64_t begin = 0; begin < numel_; begin += tile_) {
      const int64_t len = std::min(tile_, numel_ - begin);
      for (size_t j = 0; j < views.size(); ++j) views[j] = tensors_[j].slice(0, begin, begin + len);
      fn(begin, len, views);
    }
  }

  ShardTensor tensor(size_t j, const std::string& name) override {
    return ShardTensor::in_memory(name, tensors_.at(j));
  }

 private:
  int64_t numel_;
  Device device_;
  std::vector<Tensor> tensors_;
  int64_t tile_;
};

}  // namespace

std::unique_ptr<ShardResidence> memory_residence(int64_t numel, Device device, std::vector<Tensor> tensors,
                                                 int64_t tile) {
  return std::make_unique<MemoryResidence>(numel, device, std::move(tensors), tile);
}

}  // namespace zt::zero
