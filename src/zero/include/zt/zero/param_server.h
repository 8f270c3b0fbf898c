#pragma once
// Note [parameter server]: the classic baseline ZeRO is measured against (run.strategy =
// parameter_server). Of N ranks, ranks 0..S-1 are servers and the W = N - S others workers. The
// flat parameter vector (the plan's buffers, each padded to a multiple of S x 16) is partitioned
// among the servers as ZeRO-1 partitions it among ranks: server s holds, for its range only, the
// working parameters, the fp32 master (16-bit runs), the optimizer states and the averaged
// gradient; it never runs the model. A worker holds the full working parameters and the full
// gradient and runs forward and backward on its share of the global batch (train_batch_size =
// micro x accumulation x W). Each step every worker pushes gradient range s to server s, which
// sums the W pushes in worker order, averages, takes the global norm (an all-reduce with the
// other servers; workers add 0), clips and applies the same optimizer kernel as the ZeRO engine;
// then every worker pulls the updated range s from server s. The trajectory is a single
// process's with the same global batch, up to the order of the sum.
//
// Note [parameter-server traffic]: a push and a pull are point-to-point messages (Group::send /
// recv, Note [point-to-point]): each step server s receives W x Ψ/S gradient elements and sends
// W x Ψ/S parameter elements, and a worker sends Ψ and receives Ψ. So the servers' links carry
// W/S times a worker's volume; ZeRO's reduce-scatter and all-gather move 2Ψ through every rank's
// link alike, whatever N.
//
// Note [parameter-server memory]: bytes at rest per rank (Ψ' = the padded parameter count,
// p = working dtype bytes, a = gradient accumulation bytes, w = wire bytes, k = optimizer state
// bytes per element, 8 for Adam):
//   worker:   p·Ψ' (parameters) + a·Ψ' (gradients)
//   server s: (p + 4 + k)·Ψ'/S (its range of parameters, fp32 gradient sum, states)
//             + 4·Ψ'/S (fp32 master, 16-bit runs only) + 2·w·(largest range) (two receive buffers)
// fp32 Adam: worker 8Ψ, server 16Ψ/S + 8Ψ/S in receive buffers; bf16 AdamW: worker 4Ψ,
// server 18Ψ/S + 4Ψ/S. The activations are the workers' alone.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "zt/comm/group.h"
#include "zt/core/tensor.h"
#include "zt/nn/module.h"
#include "zt/zero/engine_options.h"
#include "zt/zero/plan.h"

namespace zt::zero {

// What one rank of the parameter server holds at rest, by allocator tag (Note [parameter-server memory]).
struct PsMemory {
  int64_t param = 0, grad = 0, master = 0, optim = 0, comm = 0;
  int64_t total() const { return param + grad + master + optim + comm; }
};
// `plan` partitions among the servers (plan.world = S).
PsMemory ps_memory(const Plan& plan, bool server);

class OptimShard;

// What the servers cannot do, one config line naming the key: fp16 (loss scaling), states off
// the memory they serve from (swap files; pinned host memory beside a device).
void check_param_server_options(const EngineOptions& o);

class ParamServer {
 public:
  // Every rank of `group` builds one; opts.zero.stage is not used (the plan is ZeRO-1's over S).
  ParamServer(nn::Module& model, comm::GroupPtr group, EngineOptions opts, int servers);
  ~ParamServer();
  ParamServer(const ParamServer&) = delete;
  ParamServer& operator=(const ParamServer&) = delete;

  bool is_server() const { return group_->rank() < servers_; }
  int servers() const { return servers_; }
  int workers() const { return group_->size() - servers_; }
  int worker_index() const { return group_->rank() - servers_; }  // negative on servers

  // Workers only, as Engine's.
  Tensor forward(const Tensor& x);
  Tensor forward(const std::vector<Tensor>& inputs);
  void backward(const Tensor& loss);
  // Every rank, at the accumulation boundary: push, update on the servers, pull. Every rank
  // returns the same grad_norm and clip_coef; reduce / gather hold the pushes' / pulls' waits.
  StepStats step(double lr);

  // Every rank takes part; fn runs on rank 0 with every full parameter in model order (the first
  // worker sends each, then the frozen ones) and on that worker with its own; others skip it.
  void for_each_full_param(const std::function<void(const std::string&, const Tensor&)>& fn);
  std::vector<std::pair<std::string, Shape>> full_param_shapes() const;

  const Plan& plan() const { return plan_; }
  PsMemory expected_memory() const { return ps_memory(plan_, is_server()); }
  int64_t num_params() const { return plan_.numel(); }
  int64_t padded_params() const { return plan_.padded(); }
  int64_t optimizer_steps() const { return steps_; }
  DType param_dtype() const { return plan_.policy.param_dtype; }

 private:
  using Materialize = std::function<void(const Tensor& param, int64_t begin, Tensor dst)>;  // model_layout.h's
  void init_worker(const Materialize& materialize);
  void init_server(const Materialize& materialize);
  StepStats worker_step();
  StepStats server_step(double lr);
  std::string label(const std::string& what) const;

  Device device() const { return plan_.policy.device; }
  Tensor input(const Tensor& host) const;

  nn::Module& model_;
  comm::GroupPtr group_;   // the host's: scalars, the final weights
  comm::GroupPtr pushes_;  // pushes and pulls of device tensors (staged through the host where needed)
  EngineOptions opts_;
  int servers_;
  Plan plan_;
  std::vector<Tensor> params_, frozen_;
  std::vector<std::string> names_, frozen_names_;
  // Workers: full parameters and gradients per buffer. Servers: their range of each buffer.
  std::vector<Tensor> param_bufs_, grad_bufs_;
  std::vector<Tensor> recv_slots_;  // servers: two receive buffers of the largest range
  std::unique_ptr<OptimShard> optim_;
  int64_t micro_ = 0, steps_ = 0;
};

}  // namespace zt::zero
