#pragma once
// The ZeRO engine: packs a model's trainable parameters into flat buffers and partitions
// optimizer states (stage 1), gradients (stage 2) and parameters (stage 3) over a comm::Group,
// in fp32 or in 16-bit with fp32 master weights. Its collaborators (plan, parameter store,
// gradient reducer, optimizer shard) hold the state; this class holds the step order of
// docs/design.md. With a one-rank group it is plain single-process training.
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
#include "zt/zero/engine_options.h"
#include "zt/zero/plan.h"
#include "zt/zero/shard_state.h"

namespace zt::zero {

class ParamStore;
class GradReducer;
class OptimShard;
struct CommGroups;

// What the engine refuses of its options before anything is made, as one config line: `estimate`
// runs the same (a device's offload_param needs stage 3 and the optimizer's states offloaded too).
void check_engine_options(const EngineOptions& o);

class Engine {
 public:
  Engine(nn::Module& model, comm::GroupPtr group, EngineOptions opts);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  Tensor forward(const Tensor& x);                    // casts a floating input to the working dtype
  Tensor forward(const std::vector<Tensor>& inputs);  // several inputs (ids, mask, types); casts as above
  // The coming step's learning rate, known before its backward: where the host updates the
  // optimizer states beside a device and the gradients need no scale, each buffer's update then
  // runs behind backward (Note [host update overlap]); step() must get the same lr.
  void begin_step(double lr);
  void backward(const Tensor& loss);  // one micro-batch; scales by loss_scale / accumulation steps
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
  bool last_scaled_ = false;  // the last step clipped or overflowed (Note [host update overlap])
  int64_t gathers_at_step_ = 0;
};

}  // namespace zt::zero
