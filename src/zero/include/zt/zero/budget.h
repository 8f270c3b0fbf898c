#pragma once
// The peak memory of a rank before step 1 (Note [peak memory] in budget.cpp), from which
// zero::place chooses the least offload that fits (zt/zero/placement.h). Pure arithmetic over a
// Plan; what the plan cannot know (activations, data already loaded) comes from the caller.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "zt/zero/plan.h"

namespace zt::zero {

// What the plan does not say: the engine's limits, and the bytes only the caller knows.
struct PeakInput : StepLimits {
  int64_t largest_param = 0;  // elements: the deferred initialiser's f32 values (workspace)
  int64_t activations = 0;    // at the micro-batch, checkpointing as configured
  // Beyond them, what the step's freed blocks keep resident in the caching allocator (blocks of
  // other sizes than the next step asks for): in the resident total, never in use at once.
  int64_t activation_cache = 0;
  int64_t data = 0;                 // allocator bytes held before the engine exists (the dataset)
  int64_t comm_buffers = 0;         // outside the allocator: shm staging slots this rank touches
  bool staged_collectives = false;  // a device's collectives copy through host memory (Note [staged group])
  // ZeRO++ (hpZ's pieces, qwZ's packets, qgZ's buffers: kinds of Note [step schedule]) follows
  // the plan's plan.policy.wire (Note [wire plan]).
};

// One rank's predicted peak, term by term (bytes).
struct PeakEstimate {
  MemoryEstimate states;  // model states at rest by placement (Plan::memory; the terms count its on_device())
  // Sums of Note [step schedule]'s buffer kinds over what its rules hold at once:
  int64_t grad_buckets = 0;   // buckets' and flights' kinds (full gradients, wire copies, receive buffers)
  int64_t gathered = 0;       // stage 3: units' kinds of the units gathered at once, and their gathers' packets
  int64_t secondary = 0;      // hpZ: every unit's 1/P piece, from its forward gather to the update
  int64_t param_staging = 0;  // stage 3: swapped or host-resident shards brought in for the window's gathers
  int64_t activations = 0;
  int64_t activation_cache = 0;  // resident only (PeakInput::activation_cache)
  int64_t workspace = 0;         // the larger of the initialiser's values and the step's temporaries
  int64_t comm_buffers = 0;
  int64_t data = 0;
  // Async checkpoints: this rank's snapshot (Plan::checkpoint_bytes) in host memory outside the
  // allocator, kept between saves; in neither sum below (as the shm slots, apps adds it to the RSS).
  int64_t checkpoint_snapshot = 0;
  // Beside a device: the pinned host copies of staged collectives at once (PeakInput::
  // staged_collectives), and apps adds the batches sent up (Note [batch prefetch]); host memory,
  // in neither sum below.
  int64_t host_staging = 0;
  // Beside a device: the data the run loaded, in host memory (Note [host plan]); in neither sum.
  int64_t host_data = 0;
  // Resident: every term, as the caching allocator keeps freed blocks (what the OS shows).
  int64_t total() const {
    return states.on_device() + grad_buckets + gathered + secondary + param_staging + activations + activation_cache +
           workspace + comm_buffers + data;
  }
  // The allocator's bytes in use at once (what run.memory_budget_mb holds: over it, cached blocks
  // go back to the system first): the initialiser's workspace and a step's transients never coexist.
  int64_t in_use() const {
    return states.on_device() + data +
           std::max(workspace, grad_buckets + gathered + secondary + param_staging + activations);
  }
};

PeakEstimate predict_peak(const Plan& plan, const PeakInput& in);

// "states 1.20MiB, activations ...: 2.00MiB at once, 2.50MiB resident"
std::string describe_peak(const PeakEstimate& p);

}  // namespace zt::zero
