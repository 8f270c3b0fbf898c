#pragma once
// Note [placement choice]: where a run's optimizer states and stage-3 parameter shards live, chosen
// once before step 1 from the config's offload devices and the budgets (placement.cpp). `train`
// applies the choice and `estimate` prints the same lines. A new tier is a Residence and a file.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "zt/zero/budget.h"

namespace zt::zero {

// "offload_optimizer nvme, offload_param none" (+ the lowered limits where they are).
std::string describe(const Placement& p);

struct PlacementRequest {
  std::optional<Residence> optimizer, param;  // as configured; nullopt: "auto"
  int stage = 0;
  std::string device;                    // where the run computes: "" for the CPU, else "sim:0", "cuda:0"
  int64_t device_cap = 0, host_cap = 0;  // bytes per rank (run.device_memory_mb, run.memory_budget_mb); 0: none
  std::string device_cap_name = "run.device_memory_mb";  // what sets device_cap, for the lines
  std::string host_cap_name;  // what sets host_cap, for the error ("": run.memory_budget_mb = its MiB)
  // Note [device plan]: the reduce_bucket_size lowered limits take beside a device (0: as configured),
  // below the largest parameter so that its gradient goes in rounds (Note [gradient blocks]).
  int64_t lowered_bucket = 0;
};
struct PlacementChoice {
  Placement placement;
  PeakEstimate peak;               // predict(placement)
  std::vector<std::string> lines;  // what was chosen and why, one line per choice
};
// The least offload that fits the caps, "auto" resolved; a placement the config names stays.
// `predict` gives a placement's peak. Throws a config error naming the smallest peak when none fits.
PlacementChoice place(const PlacementRequest& req, const std::function<PeakEstimate(const Placement&)>& predict);

}  // namespace zt::zero
