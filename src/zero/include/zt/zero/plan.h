#pragma once
// The plan of a run (Note [flat buffers] in layout.h): which flat buffers exist (reduce buckets
// at stages 0-2, units at stage 3), which stage-3 units stay gathered, and the exact bytes each
// rank holds. The one source for the engine and `zerotrain estimate`.
#include <cstdint>
#include <string>
#include <vector>

#include "zt/zero/layout.h"
#include "zt/zero/policy.h"

namespace zt::zero {

// Stage 3's gather limits (DeepSpeed's keys), in elements: what the parameter store obeys and
// the budget predictor assumes.
struct Stage3Limits {
  int64_t prefetch_elems = 50'000'000;      // stage3_prefetch_bucket_size
  int64_t max_live_elems = 1'000'000'000;   // stage3_max_live_parameters
  int64_t max_reuse_elems = 1'000'000'000;  // stage3_max_reuse_distance (Note [reuse distance])
};
// And every stage's: the limits Note [step schedule] obeys.
struct StepLimits : Stage3Limits {
  int64_t max_inflight_elems = 0;  // EngineOptions::max_inflight_reduce_elems (0: one bucket)
  bool overlap_comm = true;        // off: each reduction finishes as soon as it is launched
};

struct PlanInput {
  std::vector<int64_t> numels;             // trainable parameters in model order
  std::vector<std::vector<size_t>> units;  // stage-3 units: indices into numels, each once
  int64_t optim_state_bytes_per_elem = 8;  // optim::state_bytes_per_elem
  int64_t reduce_bucket_size = 500'000'000;
  int64_t persistence_threshold = 100'000;  // stage-3 units this small stay gathered
  // Per parameter (empty: none): a [V, C] embedding weight whose gradient may travel as touched
  // rows; it gets a buffer of its own (stages 0-2) or is sparse when alone in its unit (stage 3).
  std::vector<bool> sparse;
  // Per parameter (empty: none): a [V, C] embedding weight that another module uses too (tied);
  // at stages 0-2 it gets a buffer of its own, reduced in two parts (Note [tied rows]).
  std::vector<bool> tied_rows;
  // Per parameter (empty: none): used by several modules (a tied weight), so its gradient starts
  // at the first of its uses in backward, not its last (Note [step schedule]).
  std::vector<bool> shared;
  // Per parameter (empty: rows of one element): elements of a row, numel / size(0) (Note [gradient blocks]).
  std::vector<int64_t> row_elems;
};

// Per-rank bytes of model states at rest, by allocator tag.
struct MemoryEstimate {
  int64_t param = 0, grad = 0, master = 0, optim = 0;
  int64_t host = 0;  // of those, in pinned host memory beside the device (Residence::host)
  int64_t total() const { return param + grad + master + optim; }
  int64_t on_device() const { return total() - host; }  // the compute device's (all of it on cpu)
};

struct Plan {
  Policy policy;
  int world = 1;
  std::vector<BufferPlan> buffers;
  std::vector<bool> persistent;  // stage 3: unit kept gathered
  int64_t optim_state_bytes_per_elem = 8;
  // Note [gradient buckets]: elements of one gradient bucket at stages 2-3, and the default bound
  // on gradients whose reduction is in flight (reduce_bucket_size at stages 0-1).
  int64_t grad_bucket_elems = 500'000'000;

  int64_t numel() const;   // trainable parameters
  int64_t padded() const;  // with padding
  // The range of buffer b whose optimizer state this rank holds (the whole buffer at stage 0).
  Range optim_range(size_t b, int rank) const;
  MemoryEstimate memory() const;  // what the allocator shows at rest, per rank
  // Residence::file: elements per tile of each state (the largest shard's, at most the
  // configured tile), and the bytes of one tile buffer (the states of one tile, 4 KiB aligned).
  int64_t swap_tile_elems() const;
  int64_t swap_slot_bytes() const;
  // Note [host residence]: on a device with the optimizer offloaded (host or file), the pinned
  // memory the gradient shards come down into and the parameter shards go up from (where stage 3
  // does not keep them in host memory); else 0.
  int64_t host_staging_bytes() const;
  // One rank's checkpoint shard file: 1/world of every padded buffer, times the bytes per element
  // of its parameter, fp32 master (16-bit runs) and optimizer states (Note [checkpoint format]);
  // an async save's host snapshot (Note [background save]).
  int64_t checkpoint_bytes() const;
  // Note [parameter swap]: whether stage-3 unit b's parameter shard lives in a swap file (the
  // persistent units stay in memory), the elements per record of those files (whole 4 KiB pages
  // of the working dtype), and the bytes a unit's shard takes while it is read in.
  bool param_swapped(size_t b) const;
  // Note [host residence]: whether stage-3 unit b's shard lives in pinned host memory beside the
  // device (offload_param.device = cpu), uploaded for each all-gather.
  bool param_on_host(size_t b) const;
  int64_t param_tile_elems() const;
  int64_t param_staging_bytes(size_t b) const;
};

Plan make_plan(const PlanInput& in, const Policy& policy, int world);

// Largest parameter count whose model states fit `bytes_per_rank` (no padding).
int64_t max_params_that_fit(int64_t bytes_per_rank, const Policy& policy, int world, int64_t optim_bytes_per_elem);

}  // namespace zt::zero
