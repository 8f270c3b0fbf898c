#pragma once
// Stateless optimizer updates over one flat range (a rank's ZeRO shard), as llm.c's
// adamw_update: the caller owns parameters, master weights, gradients and state tensors.
// Semantics equal PyTorch 1.13's single-tensor (foreach=False) Adam, AdamW and SGD.
#include <cstdint>
#include <string>
#include <vector>

#include "zt/config/sections.h"
#include "zt/core/tensor.h"

namespace zt::optim {

// The optimizer is the config's section (Note [config sections]); its type is case-insensitive
// here. The hyper-parameters are used, and checked, as floats (Note [float hyper-parameters]).
// Throws zt::Error (ErrorKind::config) for an unknown type or an out-of-range hyper-parameter.
void validate(const config::OptimizerConfig& spec);

// Names of the fp32 state tensors, one element per parameter each, in UpdateArgs::states order
// and as checkpoints name them: Adam/AdamW {exp_avg, exp_avg_sq}, SGD with momentum
// {momentum_buffer}, plain SGD {}. Validates the spec.
std::vector<std::string> state_names(const config::OptimizerConfig& spec);

// 4 * state_names(spec).size(): known before any state exists, for memory estimates.
int64_t state_bytes_per_elem(const config::OptimizerConfig& spec);

struct UpdateArgs {
  Tensor param;                // working params: f32, bf16 or f16; contiguous, n elements
  Tensor master;               // optional fp32 master; undefined => param must be f32, updated in place
  Tensor grad;                 // f32, bf16 or f16, contiguous, n elements
  std::vector<Tensor> states;  // fp32, contiguous, n each, in state_names() order (zeroed by the caller)
  float lr = 0;
  int64_t step = 1;        // 1-based number of this update (Adam bias correction; SGD: step 1
                           // initialises the momentum buffer from the gradient, as torch does lazily)
  float grad_scale = 1.f;  // the gradient used is grad * grad_scale (clipping and 1/loss_scale folded)
  Tensor widened;          // optional, with a master: f32, n elements, gets float(param) in the same pass
};

// One update of n elements. With a master, the master is updated and param = round(master) in
// param's dtype, in the same pass. Element-wise, so results do not depend on the thread count.
// Throws zt::Error: ErrorKind::config for a bad spec, invalid_argument for bad arguments.
void update(const config::OptimizerConfig& spec, const UpdateArgs& a);

// Elements per parallel chunk; at or below this the update runs on the calling thread.
constexpr int64_t kOptimGrain = int64_t(1) << 14;

}  // namespace zt::optim
