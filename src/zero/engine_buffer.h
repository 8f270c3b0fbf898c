#pragma once
// One flat buffer of the engine (a stage 0-2 bucket or a stage-3 unit) and its shard state.
#include "zt/comm/group.h"
#include "zt/optim/optimizer.h"
#include "zt/zero/engine.h"

namespace zt::zero {

// This rank's optimizer state for one buffer's shard (optim::update is stateless).
struct OptimShard {
  std::vector<Tensor> states;  // optim::state_names() order, fp32, MemTag::optim
  int64_t step = 0;            // updates done
};

struct Engine::Buffer {
  BufferPlan plan;
  Range own;                  // this rank's range of the padded buffer
  bool persistent = false;    // stage 3: small unit kept gathered
  Tensor full_param;          // stages 0-2: always; stage 3: while gathered
  Tensor param_shard;         // stage 3: this rank's parameters
  Tensor full_grad;           // stages 0-1: always (grad); stages 2-3: during backward (comm)
  Tensor grad_shard;          // stages 2-3: reduced, accumulated gradient shard
  Tensor recv;                // reduce-scatter output in flight
  OptimShard opt;
  int pending = 0;            // parameters whose gradient is not final in this backward
  bool reduce_launched = false;
  comm::WorkPtr reduce_work, gather_work;
};

}  // namespace zt::zero
