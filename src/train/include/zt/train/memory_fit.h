#pragma once
// Note [memory fit]: the memory plan for a program of its own, as `train` makes it (Note [placement
// choice]): the engine's predicted peak per rank for each placement zero::place tries, the least
// offload that fits the budgets chosen ("auto" offload devices resolved), and the options to build
// the Engine with. `train` adds what only it knows (its data, shm slots, a device's cap) to the
// same request; a program gives the activations of its micro-batch.
#include <cstdint>
#include <string>
#include <vector>

#include "zt/nn/module.h"
#include "zt/zero/budget.h"
#include "zt/zero/engine_options.h"
#include "zt/zero/placement.h"

namespace zt::train {

int64_t largest_param(nn::Module& model);  // elements: what the deferred initialiser holds at once

// The request of `opts`: its offload devices as configured ("auto": to choose), stage and device.
zero::PlacementRequest placement_request(const zero::EngineOptions& opts);

struct MemoryFit {
  zero::EngineOptions options;     // with the chosen placement (EngineOptions::placement)
  zero::PeakEstimate peak;         // of those options
  std::vector<std::string> lines;  // what was chosen and why
};
// The least offload of `opts` whose peak per rank fits `host_budget` bytes (0: no budget, "auto"
// is then none) at `world` ranks, with `activations` bytes of one micro-batch's activations; a
// config error naming the smallest peak when none fits.
MemoryFit fit_memory(nn::Module& model, const zero::EngineOptions& opts, int world, int64_t host_budget,
                     int64_t activations);

}  // namespace zt::train
