#pragma once
// What a ZeRO run partitions and in which precision, computed once from the options: the
// collaborators read these facts instead of branching on the stage number.
#include <optional>

#include "zt/core/dtype.h"

namespace zt::zero {

struct Policy {
  int stage = 0;
  DType param_dtype = DType::f32;       // working parameters and the gradients backward writes
  DType grad_accum_dtype = DType::f32;  // where gradients accumulate across micro-batches
  DType comm_dtype = DType::f32;        // gradients on the wire
  bool fp32_master = false;             // 16-bit parameters keep an fp32 master in the optimizer shard
  bool loss_scaling = false;            // fp16: dynamic (or static) loss scaling

  bool shard_optimizer() const { return stage >= 1; }
  bool shard_gradients() const { return stage >= 2; }
  bool shard_parameters() const { return stage >= 3; }
  // Stages 2-3 send gradients away every micro-batch; stages 0-1 accumulate the full gradient
  // and reduce at the accumulation boundary.
  bool reduce_every_micro_batch() const { return shard_gradients(); }
  // Dtype of a buffer's full gradient: the accumulation dtype where it persists (stages 0-1),
  // the working dtype where it is transient (stages 2-3, the shard accumulates).
  DType full_grad_dtype() const { return shard_gradients() ? param_dtype : grad_accum_dtype; }
};

// Defaults as DeepSpeed: gradients accumulate and travel in the working dtype unless
// data_types.grad_accum_dtype / communication_data_type say otherwise.
Policy make_policy(int stage, DType param_dtype, std::optional<DType> grad_accum_dtype,
                   std::optional<DType> comm_dtype);

}  // namespace zt::zero
