#pragma once
// Note [step schedule]: the rules that decide what one rank holds at once during a step, written
// once: which reductions finish before a bucket launches, and at stages 2-3 already before its
// first gradient exists, so a bucket never fills beside a reduction its launch waits for
// (BucketFlights); which units a prefetch gathers (prefetch_window) and which a release keeps
// (reused_within). The runtime asks them at each event (GradReducer at a bucket's first gradient
// and launch, ParamStore before a prefetch or release) and the peak predictor (budget.cpp)
// replays a step's events through the same rules, summing the bytes the step's buffer kinds
// declare. A buffer kind is one entry of a table: a name, a span (a bucket from its first
// gradient until its reduction ends, a flight from launch to finish, a stage-3 unit from gather
// to release, its gather in flight, or the step) and its bytes per buffer. A kind its span makes
// is allocated by the span itself (SpanHolds: the flight's wire copy, the gathered unit), so
// adding such an entry moves the runtime's peak and the prediction alike; the other kinds are
// made by their features (the reduce-scatter's output, qgZ's and qwZ's packets, widened copies,
// staging, hpZ's pieces), which size them as their entries say.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "zt/core/allocator.h"
#include "zt/core/tensor.h"
#include "zt/zero/plan.h"

namespace zt::zero {

enum class Span {
  bucket,     // from a bucket's first gradient until its reduction finishes (its full gradient)
  flight,     // from a bucket's launch until its reduction finishes
  unit,       // stage 3: from a unit's gather until its release
  gathering,  // stage 3: from a unit's gather launch until its all-gather completes
  step,       // stage 3: from a unit's first training gather until the update
};
// The gathering kind the predictor reports on its own ("parameter staging").
inline constexpr const char* kParamStaging = "parameter staging";

struct BufferKind {
  std::string name;
  Span span = Span::flight;
  std::function<int64_t(const Plan&, size_t buffer)> bytes;  // 0: none for this buffer
  // Made by its span (a flight or a unit, SpanHolds): allocated when the span opens as bytes /
  // dtype_size elements of `dtype` (unset: f32) on the policy's device, under `tag`, and freed
  // when it closes; else its feature makes it.
  bool made = false;
  std::function<DType(const Plan&)> dtype;
  MemTag tag = MemTag::comm;
};

// The step's buffer kinds: the built-in ones (schedule.cpp) and any added since.
std::vector<BufferKind> buffer_kinds();
// Adds a kind (a feature's or a test's) for as long as the handle lives; engines built while it
// lives use it, and so do predictions made meanwhile.
class BufferKindHandle {
 public:
  explicit BufferKindHandle(size_t id) : id_(id) {}
  BufferKindHandle(const BufferKindHandle&) = delete;
  BufferKindHandle& operator=(const BufferKindHandle&) = delete;
  ~BufferKindHandle();

 private:
  size_t id_;
};
std::unique_ptr<BufferKindHandle> add_buffer_kind(BufferKind kind);

// Note [gradient blocks]: what a use of buffer b's gradient holds while it is reduced in rounds
// (0 for a buffer reduced whole), and of that the rounds' collective buffers alone.
int64_t gradient_block_bytes(const Plan& plan, size_t b);
int64_t gradient_round_bytes(const Plan& plan, size_t b);

// The sum of `span`'s kinds for buffer b.
int64_t span_bytes(const std::vector<BufferKind>& kinds, Span span, const Plan& plan, size_t b);

// The buffers one span makes for each buffer while it is open (the kinds as they were at
// construction); with `allocate` off it only counts (the predictor's replay).
class SpanHolds {
 public:
  SpanHolds(const Plan& plan, Span span, bool allocate, std::vector<BufferKind> kinds = buffer_kinds());
  void open(size_t b);   // allocates b's made kinds; opening an open one is an error
  void close(size_t b);  // frees them (nothing when b is not open)
  bool is_open(size_t b) const { return open_[b]; }
  // Kind `name`'s buffer of open buffer b (undefined when the kind has no bytes for b).
  Tensor made(size_t b, const std::string& name) const;
  int64_t bytes(size_t b) const { return span_bytes(kinds_, span_, plan_, b); }
  const std::vector<BufferKind>& kinds() const { return kinds_; }

 private:
  const Plan& plan_;
  Span span_;
  std::vector<BufferKind> kinds_;
  bool allocate_;
  std::vector<bool> open_;
  std::vector<std::vector<Tensor>> made_;  // per buffer, per kind
};

// Note [gradient buckets] in flight: which reductions must finish before another launches, and
// the bytes the buckets in flight hold. The reducer asks it before each launch, and at stages 2-3
// already at a bucket's first gradient; the predictor replays backward's order through it (with
// `allocate` off: bytes only).
class BucketFlights {
 public:
  BucketFlights(const Plan& plan, const StepLimits& limits, bool allocate,
                std::vector<BufferKind> kinds = buffer_kinds());
  // Before bucket b launches: the buckets to finish first, oldest first.
  std::vector<size_t> admit(size_t b) const;
  void launched(size_t b);  // allocates the kinds made by the flight
  void finished(size_t b);  // frees them
  Tensor made(size_t b, const std::string& name) const { return holds_.made(b, name); }
  int64_t bytes() const { return bytes_; }  // the bucket and flight spans' bytes of the buckets in flight
  bool idle() const { return order_.empty(); }
  bool in_flight(size_t b) const;
  std::vector<size_t> in_flight() const { return order_; }  // oldest first
  const std::vector<BufferKind>& kinds() const { return holds_.kinds(); }

 private:
  const Plan& plan_;
  SpanHolds holds_;
  int64_t limit_;
  std::vector<size_t> order_;
  int64_t elems_ = 0, bytes_ = 0;
};

// One event of a step's backward as the schedule plays it (Note [step schedule]).
struct StepEvent {
  enum Kind { first_gradient, launch, finish, end } kind;
  size_t buffer;  // end: none (buffers.size())
  int64_t held;   // bytes the buckets hold right after the event
};
// The order backward completes the buffers: by their last parameter, last first, except tied
// rows (Note [tied rows]), whose dense part launches first, once the tied output's use is done.
std::vector<size_t> backward_order(const Plan& plan);
// Backward's bucket events in that order, with `kinds` (one snapshot of the table), and through
// them the peak. A shared bucket (BufferPlan::shared) holds its full gradient from the start. A
// tied-rows bucket keeps what its launch held (its full gradient, its dense part's average)
// until the embedding's rows are added at the end of backward.
std::vector<StepEvent> backward_events(const Plan& plan, const StepLimits& limits,
                                       const std::vector<BufferKind>& kinds = buffer_kinds());

// Note [prefetch window]: the units ParamStore::prefetch gathers after (dir +1) or before (-1)
// unit b: in order, skipping persistent ones, while they fit prefetch_elems, and, those not
// gathered yet, stage3_max_live_parameters beside `live` gathered elements.
std::vector<size_t> prefetch_window(const Plan& plan, const Stage3Limits& limits, size_t b, int dir, int64_t live,
                                    const std::function<bool(size_t)>& gathered);

// Note [reuse distance]: whether unit b is used again in `trace` (units in the order a step uses
// them) from position `from` on, before the other units' uses there reach max_reuse elements.
bool reused_within(const Plan& plan, const std::vector<size_t>& trace, size_t from, size_t b, int64_t max_reuse);

}  // namespace zt::zero
