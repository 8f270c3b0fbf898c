#pragma once
// What the plan needs from a model: its trainable parameters in model order (a tensor
// registered twice counts once), the stage-3 units, and the frozen parameters.
#include <functional>
#include <string>
#include <vector>

#include "zt/nn/module.h"
#include "zt/zero/engine_options.h"

namespace zt::zero {

struct ModelLayout {
  Policy policy;
  PlanInput input;
  std::vector<Tensor> params, frozen;
  std::vector<std::string> names, frozen_names;
  std::vector<nn::Module*> units;  // stage 3: units[i] owns buffer i
  // Stage 3: modules whose parameters live in other units' buffers (a tied weight: GPT-2's
  // output projection is wte), with the buffers they must gather to run.
  std::vector<Borrower> borrowers;
};

// Frozen parameters get neither a gradient nor optimizer state and stay whole on every rank.
ModelLayout layout_model(nn::Module& model, const EngineOptions& opts);

// Writes elements [begin, begin + dst.numel()) of a parameter's flat values into dst (any dtype or
// device): its stored values, or its deferred initialiser's (Note [counter init]) on every thread,
// a bounded host chunk at a time. Any range alone: each rank fills only what it holds.
using Materialize = std::function<void(const Tensor& param, int64_t begin, Tensor dst)>;
Materialize initial_values(const nn::Module& model, const std::string& component);

}  // namespace zt::zero
