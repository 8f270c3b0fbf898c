// Note [residence tiers]: the host tier, ZeRO-Offload's offload device "cpu" beside a device: the
// tensors whole in pinned host memory, where the HostTier (host_tier.h) moves gradients down and
// parameters up around them and the host updates them (Note [host residence]).
#include "residence.h"
#include "swap_file.h"

namespace zt::zero {
namespace {

Tensor pinned(int64_t n, DType dtype, Device, MemTag tag) { return pinned_zeros(n, dtype, tag); }

std::unique_ptr<ShardResidence> host_optimizer_buffer(const OptimBuffer& a) {
  return optimizer_buffer_in_memory(host_memory_tier(), a, Device::cpu());
}

}  // namespace

const ResidenceTier& host_memory_tier() {
  static const ResidenceTier t{.name = "pinned host memory",
                               .offload_device = "cpu",
                               .medium = Medium::host,
                               .zeros = &pinned,
                               .optimizer_buffer = &host_optimizer_buffer};
  return t;
}

}  // namespace zt::zero
