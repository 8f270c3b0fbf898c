#pragma once
// Working parameters of every flat buffer: full on every rank (stages 0-2) or a shard that is
// all-gathered on demand (stage 3). Model parameters are views into the full buffer while it
// exists, and have no storage while a stage-3 unit is released.
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "model_layout.h"
#include "wire.h"
#include "zt/comm/group.h"
#include "zt/core/tensor.h"
#include "zt/zero/engine_options.h"
#include "zt/zero/plan.h"
#include "zt/zero/schedule.h"
#include "zt/zero/shard_state.h"

namespace zt::zero {

class ShardResidence;

class ParamStore {
 public:
  // `params` in model order; their current values, or for deferred ones what `materialize`
  // gives, become the initial parameters, written straight into the flat layout (stage 3: only
  // this rank's shard of each unit, a persistent unit whole).
  // Stage 3's training gathers follow Note [ZeRO++]: int8 where the wire plan says so, from the
  // secondary pieces when groups.secondary is set.
  ParamStore(const Plan& plan, std::vector<Tensor> params, const CommGroups& groups, Stage3Limits limits,
             const Materialize& materialize);
  ~ParamStore();

  // This rank's working parameters of buffer b over plan.optim_range (the optimizer writes here);
  // a swapped unit's shard is read in and stays until publish(b).
  Tensor owned(size_t b);
  // The same values to read: for a swapped unit a copy read from its file.
  Tensor owned_copy(size_t b);
  // Note [widened by the update]: owned(b)'s range of the widened copy, for the optimizer to write
  // beside the parameters (undefined where there is none: the param dtype computes, stage 3, swapped);
  // once it has, widened_by_update(b) and refresh_compute widens only the rest of the buffer.
  Tensor owned_compute(size_t b);
  void widened_by_update(size_t b) { bufs_[b].compute.by_update = true; }
  // This rank's parameters of buffer b as a checkpoint sees them (streamed when swapped).
  ShardTensor owned_state(size_t b);
  // After the optimizer wrote owned(b): stages 1-2 all-gather it into the full buffer (in flight
  // until the next publish or finish_publish), a persistent stage-3 unit refreshes its gathered
  // copy, a swapped shard is written back.
  void publish(size_t b, const std::string& label);
  void finish_publish();  // waits for the all-gather publish left in flight (stages 1-2)

  bool gathered(size_t b) const { return bufs_[b].full.defined(); }
  // Parameter `index` of gathered buffer b in the param dtype (what is saved), whatever the model computes in.
  Tensor full_param(size_t b, size_t index) const;
  // Note [f32 compute]: the widened copies of the gathered buffers, again from their full values
  // (after an update or a load wrote them); nothing when the model computes in the param dtype.
  // After an update, not the ranges the update widened itself (Note [widened by the update]).
  void refresh_compute(bool after_update);
  void gather(size_t b, bool wait, const std::string& label);  // stage 3
  // Stage 3; persistent units stay, and with `may_keep` a unit used again soon (Note [reuse distance]).
  void release(size_t b, bool may_keep = true);
  // The first step's order of unit uses becomes the trace; later steps follow it. Gathers after
  // it and before the next forward (consolidation) are exact.
  void end_step();
  // A forward of a training pass (gradients on) or of an evaluation (which leaves the trace alone).
  void begin_forward(bool training) { training_pass_ = training; }
  int64_t gathers() const { return gathers_; }                 // unit all-gathers launched since the engine was built
  void prefetch(size_t b, int dir, const std::string& label);  // gathers units after (+1) or before (-1) b

  CommOverlap take_overlap() { return std::exchange(overlap_, {}); }  // all-gathers waited for since
  SwapStats swap_stats() const;                                       // parameter swap files' I/O

 private:
  CommOverlap overlap_;
  // A stage-3 all-gather in flight and what ZeRO++ keeps of it (Note [ZeRO++]).
  struct GatherState {
    comm::WorkPtr work;
    Tensor uploaded;         // a host-resident shard's copy on the device, while its all-gather runs
    Tensor packet, packets;  // qwZ: this rank's int8 packet and every rank's, while gathering
    Tensor secondary;        // hpZ: this rank's piece of the full unit, until the update
    bool training = false;   // launched by a training pass
    bool exact = true;       // full holds the shards' values, not qwZ's
  };
  // Note [parameter swap]: the shard's records (the file tier) and where its copy in memory stands.
  struct SwapState {
    std::unique_ptr<ShardResidence> file;  // null: not swapped
    bool reading = false;                  // a read into `shard` is in flight
    bool updating = false;                 // owned(b) handed the shard out: publish writes it back
    bool fresh = false;                    // no record written yet: the initialisers' values (Note [fresh swap files])
  };
  // Note [f32 compute]: full widened, what the model's parameters view (while bound).
  struct Widened {
    Tensor work;
    bool by_update = false;  // the update wrote work's optim range this step (Note [widened by the update])
  };
  struct PublishState {  // stages 1-2: this buffer's all-gather, while in flight
    comm::WorkPtr work;
    Tensor in;  // its input, this rank's updated range
  };
  struct Buf {
    Range own;
    Tensor full;   // padded, param dtype (stages 0-2 always; stage 3 while gathered)
    Tensor shard;  // stage 3: this rank's slice (swapped: while read in; host: Plan::param_on_host)
    Widened compute;
    GatherState gather;
    SwapState swap;
    PublishState publish;
  };
  static constexpr size_t kNone = ~size_t(0);
  size_t publishing_ = kNone;  // the buffer whose publish is in flight
  void bind(size_t b);
  void unbind(size_t b);
  enum class Source { exact, quantized, secondary };  // Note [ZeRO++]
  void launch_gather(size_t b, Source src, const std::string& label);
  void finish_gather(size_t b);
  Tensor staging(size_t b) const;      // swapped: a page-aligned buffer of the shard's whole records
  void stage_in(size_t b, bool wait);  // swapped: reads the shard in (waits when asked)
  void stage_out(size_t b);            // swapped: writes the shard back and frees it
  // Buffer b's elements `range` into dst (range.size() elements), parameter by parameter.
  void write_initial(size_t b, Tensor dst, Range range, const Materialize& materialize) const;

  const Plan& plan_;
  std::vector<Tensor> params_;
  comm::Group& group_;
  const CommGroups& groups_;
  Stage3Limits limits_;
  bool quantized_weights() const { return plan_.policy.wire.int8_weights; }  // qwZ (Note [wire plan])
  Materialize materialize_;  // a fresh shard's values (Note [fresh swap files])
  std::vector<Buf> bufs_;
  SpanHolds units_;  // stage 3: what each gathered unit's span makes (Note [step schedule])
  std::string swap_dir_;
  // Note [reuse distance]: units in the order the first step used them, and where this step is.
  std::vector<size_t> trace_;
  bool recording_ = true, following_ = false, training_pass_ = true;
  size_t cursor_ = 0;
  int64_t gathers_ = 0;
  void note_use(size_t b);
  bool may_stay(size_t b) const;
  int64_t live_elems() const;
};

}  // namespace zt::zero
