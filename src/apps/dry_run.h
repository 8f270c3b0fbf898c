#pragma once
// Note [measured activations]: what the autograd tape and the step hold beside the model states is
// measured, not written per model: one forward and backward of a micro-batch (two where gradients
// accumulate), the step, and one evaluation forward run through the engine on the meta device
// (Note [meta device]: kernels that do nothing, an allocator that only counts with the caching
// allocator's size classes and tags). The plan takes the activation tag's peak, and in its resident
// total the blocks they freed that the cache keeps (MemStats::resident_peak). A model a user
// registers is planned as the shipped ones are: nothing here knows a model family.
#include <cstdint>

#include "zt/config/config.h"

namespace zt::apps {

struct DryRunShape {
  int64_t micro = 1, accumulation = 1;  // the training micro-batch and its accumulation steps
  int64_t eval_batch = 0;               // samples per evaluation forward (0: none)
  bool f32_compute = false;             // a 16-bit run computing in f32 (Note [f32 compute])
  int stage = 0;                        // the ZeRO stage planned (where gradients are written)
  int64_t reduce_bucket_size = 0;       // the placement's (lowered limits may cut it); 0: the config's
};

struct MeasuredActivations {
  int64_t peak = 0;      // the activation tag's bytes in use at once
  int64_t resident = 0;  // those bytes plus the blocks they freed that the cache keeps (>= peak)
};
// That step on one rank, measured once per distinct shape and setting (estimate and the placement
// search ask many times).
MeasuredActivations measure_activations(const config::Config& c, const DryRunShape& s);

}  // namespace zt::apps
