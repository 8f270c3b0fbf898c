#pragma once
// The ZeRO engine's options and what it reports (step statistics, overlap, sparse bytes), apart
// from the Engine class: its collaborators (param store, reducer, wire, layout) and the parameter
// server use these without including engine.h.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "zt/comm/group.h"
#include "zt/config/sections.h"
#include "zt/core/device.h"
#include "zt/core/dtype.h"
#include "zt/nn/module.h"
#include "zt/zero/placement.h"
#include "zt/zero/plan.h"

namespace zt::zero {

// The engine takes the config's sections as they are (Note [config sections]), plus what is no
// key of one section: the working dtype and what the caller derives from several keys.
struct EngineOptions {
  config::ZeroConfig zero;                       // stage, buckets, stage3_* limits, offload_optimizer, offload_param
  config::OptimizerConfig optimizer;             // validated by the optimizer shard (optim::validate)
  config::Fp16Config fp16;                       // loss scaling when dtype is f16
  config::AioConfig aio;                         // swap files' I/O (offload_*.device = nvme)
  DType dtype = DType::f32;                      // working precision: f32, bf16 (bf16.enabled), f16 (fp16.enabled)
  Device device = Device::cpu();                 // run.device (Policy::device)
  std::optional<DType> grad_accum_dtype;         // data_types.grad_accum_dtype (default: dtype)
  std::optional<DType> communication_data_type;  // default: dtype
  // A 16-bit run whose products take the f32 path (Note [16-bit products]): the model computes in
  // f32 over weights widened once per gather (Note [f32 compute]); bf16 stays on the wire and in store.
  bool f32_compute = false;
  int64_t gradient_accumulation_steps = 1;  // resolved by the batch rule (config::resolve_batch)
  double gradient_clipping = 0.0;           // max global norm; 0 = off
  // DeepSpeed's sparse_gradients: an embedding weight that is not tied to another use gets a
  // buffer of its own, and ranks exchange only the rows their micro-batches touched; a tied one
  // (stages 0-2) reduces its other uses' part early and its own rows at the end (Note [tied rows]).
  bool sparse_gradients = false;
  // Swap files live under <nvme_path>/<run_name>/rank<r>/ ("": under <nvme_path>/rank<r>/).
  std::string run_name;
  // Most gradient elements whose reduction may be in flight; launching past it first finishes
  // the oldest (0: one bucket, Note [gradient buckets]). Bounds the full gradients alive at stages
  // 2-3; the memory budget lowers it (Note [budget choice]).
  int64_t max_inflight_reduce_elems = 0;
  // Note [placement]: where the states live, as zero::place chose it (train's memory plan) or a
  // program says; unset, the offload sections' devices say it (configured_placement).
  std::optional<Placement> placement;
};

Placement placement_of(const EngineOptions& o);  // the placement the engine applies
// The options with `at` applied: its residences, and its lowered limits on the options they bound.
EngineOptions with_placement(EngineOptions e, const Placement& at);

inline StepLimits step_limits(const EngineOptions& o) {
  StepLimits l;
  static_cast<Stage3Limits&>(l) = {o.zero.stage3_prefetch_bucket_size, o.zero.stage3_max_live_parameters,
                                   o.zero.stage3_max_reuse_distance};
  l.max_inflight_elems = o.max_inflight_reduce_elems;
  l.overlap_comm = o.zero.overlap_comm;
  return l;
}

// Note [overlap]: for one kind of collective, the seconds its transfers ran (busy) and the seconds
// the engine then waited for them (blocked), summed over a step on this rank; what was not waited
// for ran behind computation. shm's comm thread times each transfer; mpi cannot say when its data
// moved (OpenMPI progresses only inside MPI calls), so its busy time is 0 and hidden() unknown.
struct CommOverlap {
  double busy_s = 0, blocked_s = 0;
  void add(const comm::Work& w) {
    busy_s += w.busy_seconds();
    blocked_s += w.blocked_seconds();
  }
  CommOverlap& operator+=(const CommOverlap& o) {
    busy_s += o.busy_s;
    blocked_s += o.blocked_s;
    return *this;
  }
  // Fraction of the busy time nobody waited for; nullopt when nothing was measured.
  std::optional<double> hidden() const {
    if (busy_s <= 0) return std::nullopt;
    return std::clamp(1.0 - blocked_s / busy_s, 0.0, 1.0);
  }
};

struct StepStats {
  CommOverlap reduce;    // gradient reduce-scatters / all-reduces of this step's backward passes
  CommOverlap gather;    // stage 3: parameter all-gathers of this step's forward and backward passes
  int64_t gathers = 0;   // stage 3: unit all-gathers launched since the last step
  double grad_norm = 0;  // global L2 norm before clipping (unscaled)
  double clip_coef = 1;
  bool skipped = false;   // fp16 overflow: no update on any rank
  double loss_scale = 1;  // the scale this step's gradients carried
  // grad_norm and clip_coef from the global sum of squared (scaled) gradients, once for every
  // strategy: the norm unscaled, torch's clip factor where max_norm > 0.
  void set_norm(double sumsq, double max_norm);
};

// sparse_gradients: bytes the sparse buffers' exchanges moved on this rank since the engine was
// built, and what their dense reductions would have moved, both counted as Note [comm bytes] does.
struct SparseCommBytes {
  int64_t moved = 0, dense_equivalent = 0;
  int64_t tied_early = 0;  // tied embeddings whose dense part was reduced before backward ended
};

// The plan an Engine with these options would make for `model` at this world size and ranks per
// node (its wire plan's), without building it (what `zerotrain estimate` prints).
Plan plan_model(nn::Module& model, const EngineOptions& opts, int world, int local_size = 1);

// Stage 3: a module whose parameters live in other units' buffers (a tied weight: GPT-2's
// output projection is wte), with the buffers it gathers to run.
struct Borrower {
  nn::Module* module;
  std::vector<size_t> buffers;
};

}  // namespace zt::zero
