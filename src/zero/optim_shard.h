#pragma once
// This rank's optimizer shard of every flat buffer: the fp32 master weights (16-bit runs) and
// the optimizer states over plan.optim_range, updated by optim's stateless kernels. They live
// where the policy says (Residence): in the device's memory, in pinned host memory (Note [host
// residence]), or in one swap file per buffer streamed through a few tile buffers (Note
// [optimizer swap] in optim_shard.cpp).
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "zt/core/tensor.h"
#include "zt/optim/optimizer.h"
#include "zt/zero/plan.h"
#include "zt/zero/shard_state.h"

namespace zt::zero {

class SwapFile;

class OptimShard {
 public:
  // `initial(b)` gives this rank's working parameters of buffer b (the master starts from them).
  OptimShard(const Plan& plan, const config::OptimizerConfig& spec, int rank,
             const std::function<Tensor(size_t)>& initial);
  ~OptimShard();

  // One update of buffer b: params and grads are this rank's range, any float dtypes.
  void update(size_t b, const Tensor& params, const Tensor& grads, float lr, float grad_scale);
  void finish_step() { ++steps_; }
  void set_steps(int64_t s) { steps_ = s; }
  int64_t steps() const { return steps_; }
  // Named tensors of buffer b: "master" (16-bit runs) then the optimizer's states.
  std::vector<ShardTensor> state(size_t b);
  SwapStats swap_stats() const;

 private:
  struct Buf {
    int64_t numel = 0;
    Tensor master;                   // Residence::memory and host
    std::vector<Tensor> states;      // Residence::memory and host
    std::unique_ptr<SwapFile> file;  // Residence::file
    bool host = false;               // Residence::host: master and states in pinned host memory
    bool fresh = false;              // Residence::file: no record written yet (Note [fresh swap files])
  };
  void write_initial(Buf& buf, size_t b);  // a fresh file's records: the master from initial_(b), states 0
  void fresh_record(Tensor rec, const Tensor& params) const;  // one such record from its tile's parameters
  void stage_down(const Tensor& params, const Tensor& grads, int64_t begin, int64_t len, optim::UpdateArgs& a);
  void stage_up(const Tensor& params, int64_t begin, int64_t len);
  void timed_update(const optim::UpdateArgs& a);
  // Residence::file: tile buffer s (its tensors, master first, each tile_ elements).
  float* slot(int s) const { return slots_[size_t(s)].data<float>(); }
  void run_tiles(Buf& buf, const std::function<void(int64_t tile, int64_t len, Tensor rec)>& fn, bool read_first);

  config::OptimizerConfig spec_;
  std::function<Tensor(size_t)> initial_;
  std::vector<std::string> names_;
  std::vector<Buf> bufs_;
  int64_t steps_ = 0;
  bool master_ = false;  // 16-bit run: a master leads the record
  int64_t tile_ = 0;     // elements of each tensor per tile
  std::string dir_;      // Residence::file: this rank's swap folder
  std::vector<Tensor> slots_;
  Tensor stage_param_, stage_grad_;  // on a device: the pinned tiles of its updates (Note [host residence])
  SwapStats staging_;                // their copies' times and bytes
  double compute_s_ = 0;
};

}  // namespace zt::zero
