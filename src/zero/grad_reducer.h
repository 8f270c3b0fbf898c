#pragma once
// Gradients of every flat buffer: backward writes each parameter's gradient straight into its
// buffer's full gradient (contiguous_gradients); once every parameter of a buffer is final the
// buffer is averaged over the ranks in one of the wire formats (Note [wire formats]: dense,
// quantized across nodes, or a sparse buffer's touched rows), and at stages 2-3 added into this
// rank's gradient shard and freed. A tied embedding travels in two parts (Note [tied rows]); a
// buffer led by a parameter larger than reduce_bucket_size, in rounds (Note [gradient blocks]).
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "grad_blocks.h"
#include "wire.h"
#include "zt/comm/group.h"
#include "zt/core/tensor.h"
#include "zt/zero/engine_options.h"
#include "zt/zero/plan.h"
#include "zt/zero/schedule.h"

namespace zt::zero {

class GradReducer {
 public:
  using Callback = std::function<void(size_t buffer)>;
  // on_launched(b) runs once buffer b's gradient is complete and its reduction launched: the
  // parameters are not needed any more this pass (stage 3 releases the unit right away).
  // on_final(b) runs once owned(b) holds the step's averaged gradient (in the boundary's backward,
  // maybe before backward ends). Dense or quantized as plan.policy.wire says (qgZ: groups.cross
  // must exist). Buckets in flight follow Note [step schedule] under `limits`.
  GradReducer(const Plan& plan, std::vector<Tensor> params, const CommGroups& groups, const StepLimits& limits,
              Callback on_launched, Callback on_final = nullptr);
  ~GradReducer();

  void begin_backward(bool boundary, const std::string& label);
  void end_backward();  // launches what no hook launched (same order on every rank), finishes all

  // The averaged gradient over plan.optim_range(b) (valid after the boundary's end_backward;
  // undefined with gradients sent to the host, Note [host gradient shard]).
  Tensor owned(size_t b) const;
  // Each buffer's sum of squares of its averaged gradient (one i64 slot holding a double each, on
  // the device), for the step's norm; with gradients sent to the host, kept as each became final.
  Tensor sums_of_squares();
  void zero();  // after the optimizer step

  const SparseCommBytes& sparse_bytes() const { return sparse_bytes_; }
  CommOverlap take_overlap() { return std::exchange(comm_overlap_, {}); }  // since the last call

 private:
  struct Buf {
    Range own;
    Tensor full;   // padded, full_grad_dtype (stages 0-1 persistent, 2-3 during backward)
    Tensor shard;  // stages 2-3: accumulated over micro-batches
    bool shard_stale = false;           // shard holds no gradient of this step yet: the first one is written
    std::vector<bool> stale_rounds;     // Note [gradient blocks]: the same per round of a buffer in blocks
    std::vector<SlotGrad> waiting;      // Note [gradient blocks]: gradients waiting for their rounds
    std::unique_ptr<WireEncoder> rows;  // sparse and tied buffers: the touched rows' format
    std::unique_ptr<Transfer> transfer;  // launched and not finished
    int pending = 0;
    bool launched = false;
    bool early = false;  // tied rows: the dense part is launched; the rows follow in end_backward
    Tensor early_sum;    // tied rows: the dense part's average, once finished
  };
  void allocate_full(size_t b);
  void zero_stale_slots(size_t b);  // Note [stale gradient slots]: those no gradient reached, before b is read
  void open_bucket(size_t b);  // stages 2-3, at b's first gradient
  void on_param_ready(size_t b);
  void on_param_partial(size_t b, int uses_left);
  void take_block_gradient(size_t b, size_t slot, const Tensor& g);  // Note [gradient blocks]
  void send_blocks(size_t b);
  Tensor& block_shard(size_t b);  // Note [host gradient shard]: made for the pass where it goes down after
  void launch(size_t b, bool early = false);
  void finish_tied_rows(size_t b);
  Tensor store_reduced(size_t b, const Tensor& avg);
  void finish(size_t b);
  void deliver(size_t b);  // b's averaged gradient is whole: its taker (on_final) runs

  const Plan& plan_;
  std::vector<Tensor> params_;
  comm::Group& group_;
  std::unique_ptr<WireEncoder> dense_;  // dense or quantized
  bool overlap_;
  Callback on_launched_, on_final_;
  std::vector<Buf> bufs_;
  BucketFlights flights_;
  bool reducing_ = false;  // this backward pass reduces (stages 2-3, or the boundary)
  bool boundary_ = false;   // this backward pass ends the step's accumulation
  std::string label_;
  Tensor sums_;  // Note [host gradient shard]: the step's sums of squares, as each buffer became final
  SparseCommBytes sparse_bytes_;
  CommOverlap comm_overlap_;
};

}  // namespace zt::zero
