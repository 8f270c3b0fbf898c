// Note [residence tiers]: the one switch over residences, and what is asked of every tier by name.
#include "residence.h"

namespace zt::zero {

const ResidenceTier& tier_of(Residence r) {
  switch (r) {
    case Residence::memory:
      return memory_tier();
    case Residence::host:
      return host_memory_tier();
    case Residence::file:
      return file_tier();
  }
  ZT_THROW("[zero] residence ", int(r), " has no tier");
}

Medium medium_of(Residence r) { return tier_of(r).medium; }

std::string offload_device(Residence r) { return tier_of(r).offload_device; }
std::string residence_name(Residence r) { return tier_of(r).name; }

// The tier a config's offload device names; a host-medium tier only beside a device (on a CPU run
// the states are in host memory already). Anything else, "none" included, is memory.
constexpr Residence kNamed[] = {Residence::host, Residence::file};

std::optional<Residence> residence_of(const std::string& device, bool beside_device) {
  if (device == "auto") return std::nullopt;
  for (Residence r : kNamed)
    if (device == tier_of(r).offload_device && (beside_device || medium_of(r) != Medium::host)) return r;
  return Residence::memory;
}

}  // namespace zt::zero
