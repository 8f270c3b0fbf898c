#pragma once
// The ZeRO engine: packs a model's trainable parameters into flat buffers and partitions
// optimizer states (stage 1), gradients (stage 2) and parameters (stage 3) over a comm::Group,
// in fp32 or in 16-bit with fp32 master weights. Its collaborators (plan, parameter store,
// gradient reducer, optimizer shard) hold the state; this class holds the step order of
// DESIGN.md. With a one-rank group it is plain single-process training.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "zt/comm/group.h"
#include "zt/config/sections.h"
#include "zt/core/tensor.h"
#include "zt/nn/module.h"
#include "zt/optim/loss_scaler.h"
#include "zt/optim/optimizer.h"
#include "zt/zero/plan.h"
#include "zt/zero/shard_state.h"

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
  int64_t gradient_accumulation_steps = 1;       // resolved by the batch rule (config::resolve_batch)
  double gradient_clipping = 0.0;                // max global norm; 0 = off
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
};

inline Stage3Limits stage3_limits(const EngineOptions& o) {
  return {o.zero.stage3_prefetch_bucket_size, o.zero.stage3_max_live_parameters, o.zero.stage3_max_reuse_distance};
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
};

// sparse_gradients: bytes the sparse buffers' exchanges moved on this rank since the engine was
// built, and what their dense reductions would have moved, both counted as Note [comm bytes] does.
struct SparseCommBytes {
  int64_t moved = 0, dense_equivalent = 0;
  int64_t tied_early = 0;  // tied embeddings whose dense part was reduced before backward ended
};

// The plan an Engine with these options would make for `model` at this world size, without
// building it (what `zerotrain estimate` prints).
Plan plan_model(nn::Module& model, const EngineOptions& opts, int world);

// Stage 3: a module whose parameters live in other units' buffers (a tied weight: GPT-2's
// output projection is wte), with the buffers it gathers to run.
struct Borrower {
  nn::Module* module;
  std::vector<size_t> buffers;
};

class ParamStore;
class GradReducer;
class OptimShard;
struct CommGroups;

class Engine {
 public:
  Engine(nn::Module& model, comm::GroupPtr group, EngineOptions opts);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  Tensor forward(const Tensor& x);                    // casts a floating input to the working dtype
  Tensor forward(const std::vector<Tensor>& inputs);  // several inputs (ids, mask, types); casts as above
  void backward(const Tensor& loss);                  // one micro-batch; scales by loss_scale / accumulation steps
  bool at_boundary() const { return micro_ == opts_.gradient_accumulation_steps; }
  StepStats step(double lr);  // exactly at the accumulation boundary

  // Calls fn(name, full parameter) for every trainable parameter in model order (stage 3
  // gathers one unit at a time), then for the frozen ones.
  void for_each_full_param(const std::function<void(const std::string&, const Tensor&)>& fn);
  // The names and shapes for_each_full_param yields, in its order, without gathering anything.
  std::vector<std::pair<std::string, Shape>> full_param_shapes() const;

  const Plan& plan() const { return plan_; }
  const Policy& policy() const { return plan_.policy; }
  MemoryEstimate expected_memory() const { return plan_.memory(); }
  int64_t num_params() const { return plan_.numel(); }
  int64_t padded_params() const { return plan_.padded(); }
  const comm::GroupPtr& group() const { return group_; }
  // Bytes this rank's collectives moved (Note [comm bytes]), over every group the engine uses
  // (ZeRO++ adds the node, cross-node and secondary groups).
  uint64_t comm_bytes() const;
  uint64_t cross_node_bytes() const;  // of those, what crossed nodes (comm::Group::cross_node_bytes)
  // What ZeRO++ does in this run ("" when off), e.g. "int8 weights, int4 gradients across 2
  // nodes, backward gathers over 2 ranks".
  std::string zeropp_summary() const;
  const EngineOptions& options() const { return opts_; }
  int64_t optimizer_steps() const { return steps_; }
  double loss_scale() const;
  SparseCommBytes sparse_comm_bytes() const;
  SwapStats swap_stats() const;  // optimizer offload's I/O since the engine was built
  std::vector<ShardState> shard_states();

  // Trainable parameters in model order (plan slots index these) and their names.
  const std::vector<Tensor>& params() const { return params_; }
  const std::vector<std::string>& param_names() const { return names_; }
  // The counters a checkpoint restores beside the shard states.
  struct Counters {
    int64_t optimizer_steps = 0;
    std::optional<optim::LossScaler::State> loss_scaler;  // fp16 only
  };
  Counters counters() const;
  void load_counters(const Counters& c);
  // After shard states were written (a checkpoint load): every rank's full working parameters
  // are rebuilt from the owned ranges (stages 1-2 and persistent stage-3 units all-gather).
  void refresh_params();

 private:
  void install_unit_hooks();
  std::string label(const std::string& what) const;

  nn::Module& model_;
  comm::GroupPtr group_;
  EngineOptions opts_;
  Plan plan_;
  std::unique_ptr<CommGroups> groups_;
  std::vector<Tensor> params_, frozen_;
  std::vector<std::string> names_, frozen_names_;
  std::vector<nn::Module*> units_;  // stage 3: unit i owns buffer i
  std::vector<Borrower> borrowers_;
  std::unique_ptr<ParamStore> store_;
  std::unique_ptr<GradReducer> reducer_;
  std::unique_ptr<OptimShard> optim_;
  std::unique_ptr<optim::LossScaler> scaler_;
  int64_t micro_ = 0;  // backward() calls since the last step
  int64_t steps_ = 0;
  int64_t gathers_at_step_ = 0;
};

}  // namespace zt::zero
