#pragma once
// This rank's optimizer shard of every flat buffer: the fp32 master weights (16-bit runs) and
// the optimizer states over plan.optim_range, updated by optim's stateless kernels. They live
// where the policy says (Residence; Note [residence]): in the device's memory, in pinned host
// memory (Note [host residence]), or in one swap file per buffer streamed through a few tile
// buffers (Note [optimizer swap]).
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "zt/core/copy_stream.h"
#include "zt/core/tensor.h"
#include "zt/optim/optimizer.h"
#include "zt/zero/plan.h"
#include "zt/zero/shard_state.h"

namespace zt::zero {

class ShardResidence;

class OptimShard {
 public:
  // `initial(b)` gives this rank's working parameters of buffer b (the master starts from them).
  OptimShard(const Plan& plan, const config::OptimizerConfig& spec, int rank,
             const std::function<Tensor(size_t)>& initial);
  ~OptimShard();

  // Buffer b's averaged gradient is final (GradReducer's on_final): beside a device it starts
  // coming down into pinned memory on the copy stream while backward goes on (Note [host residence]).
  void take_gradient(size_t b, const Tensor& grads);
  // One update of buffer b: params and grads are this rank's range, any float dtypes.
  void update(size_t b, const Tensor& params, const Tensor& grads, float lr, float grad_scale);
  void finish_step() { ++steps_; }
  void set_steps(int64_t s) { steps_ = s; }
  int64_t steps() const { return steps_; }
  // Named tensors of buffer b: "master" (16-bit runs) then the optimizer's states.
  std::vector<ShardTensor> state(size_t b);
  SwapStats swap_stats() const;

 private:
  void stage_down(const Tensor& params, const Tensor& grads, int64_t begin, int64_t len, optim::UpdateArgs& a);
  void stage_up(const Tensor& params, int64_t begin, int64_t len);
  void timed_update(const optim::UpdateArgs& a);

  config::OptimizerConfig spec_;
  std::function<Tensor(size_t)> initial_;
  std::vector<std::string> names_;
  std::vector<Tensor> slots_;  // Residence::file: the tile buffers its files share (master first, each tile_ elements)
  std::vector<std::unique_ptr<ShardResidence>> bufs_;  // Note [residence]: master (16-bit runs), then states
  int64_t steps_ = 0;
  bool master_ = false;  // 16-bit run: a master leads the tensors
  int64_t tile_ = 0;     // elements of each tensor per tile (pinned host memory and files)
  Tensor stage_param_;                 // on a device: the pinned parameter tile of its updates (Note [host residence])
  std::vector<Tensor> host_grads_;     // on a device: each buffer's gradient shard in pinned memory
  std::vector<CopyEvent> grads_down_;  // their copies in flight (take_gradient)
  SwapStats staging_;                // their copies' times and bytes
  double compute_s_ = 0;
};

}  // namespace zt::zero
