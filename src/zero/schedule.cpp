#include "zt/zero/schedule.h"

#include <algorithm>
#include <mutex>
#include <tuple>

#include "zt/core/error.h"
#include "zt/ops/compress.h"

namespace zt::zero {

namespace {

// Stages 2-3 (at 0-1 it is a state, Plan::memory); never for a buffer in blocks (Note [gradient blocks]).
int64_t full_grad_bytes(const Plan& plan, size_t b) {
  const Policy& pol = plan.policy;
  if (!pol.shard_gradients() || plan.buffers[b].block_elems > 0) return 0;
  return plan.buffers[b].padded * int64_t(dtype_size(pol.full_grad_dtype()));
}

// What a dense or quantized launch sends: a copy in comm_dtype where that differs from the full
// gradient's, and always for tied rows, whose buffer takes the embedding's rows while the dense
// part travels (Note [tied rows]). Sparse buffers send their rows (Note [sparse rows]).
int64_t wire_copy_bytes(const Plan& plan, size_t b) {
  const Policy& pol = plan.policy;
  const BufferPlan& buf = plan.buffers[b];
  if (buf.sparse || buf.block_elems > 0 || (pol.comm_dtype == pol.full_grad_dtype() && !buf.tied_rows)) return 0;
  return buf.padded * int64_t(dtype_size(pol.comm_dtype));
}

int64_t receive_bytes(const Plan& plan, size_t b) {  // a reduce-scatter's output (wire.cpp)
  const Policy& pol = plan.policy;
  if (!pol.shard_optimizer() || plan.buffers[b].block_elems > 0) return 0;
  return plan.buffers[b].padded / plan.world * int64_t(dtype_size(pol.comm_dtype));
}

// qgZ across M > 1 nodes (Note [wire plan]): the node averages (M shards, when L > 1), the packets
// out and in, and the fp32 sum of this rank's shard (wire.cpp's quantized encoder).
int64_t quantized_gradient_bytes(const Plan& plan, size_t b) {
  const WirePlan& w = plan.policy.wire;
  if (w.gradient_bits == 0 || !plan.policy.shard_optimizer()) return 0;
  const int64_t M = w.nodes, s = plan.buffers[b].padded / plan.world;
  const int64_t cb = int64_t(dtype_size(plan.policy.comm_dtype));
  return (w.local_size > 1 ? M * s * cb : 0) + 2 * M * ops::packet_words(s, w.gradient_bits) * 4 + s * 4;
}

// Stage 3: a unit that is not persistent exists whole only from its gather to its release, and
// (Note [f32 compute]) so does its widened copy; a persistent one is a state (Plan::memory).
bool transient_unit(const Plan& plan, size_t b) {
  return plan.policy.shard_parameters() && !(b < plan.persistent.size() && plan.persistent[b]);
}
int64_t gathered_bytes(const Plan& plan, size_t b) {
  return transient_unit(plan, b) ? plan.buffers[b].padded * int64_t(dtype_size(plan.policy.param_dtype)) : 0;
}
int64_t widened_bytes(const Plan& plan, size_t b) {
  const Policy& pol = plan.policy;
  return transient_unit(plan, b) && pol.widens() ? plan.buffers[b].padded * int64_t(dtype_size(pol.compute_dtype)) : 0;
}

// A swapped shard read into memory (CPU), or on a device the upload of a shard that lives on the
// host (read from its file, or pinned) for the all-gather (Note [parameter swap], [host residence]).
int64_t staging_bytes(const Plan& plan, size_t b) {
  if (!plan.param_swapped(b) && !plan.param_on_host(b)) return 0;
  const int64_t pb = int64_t(dtype_size(plan.policy.param_dtype));
  return plan.policy.device.is_cpu() ? plan.param_staging_bytes(b) : plan.buffers[b].padded / plan.world * pb;
}

// qwZ (Note [ZeRO++]): a training gather's int8 packets, this rank's and every rank's.
int64_t int8_packet_bytes(const Plan& plan, size_t b) {
  if (!plan.policy.wire.int8_weights || !transient_unit(plan, b)) return 0;
  return (1 + plan.world) * ops::packet_words(plan.buffers[b].padded / plan.world, 8) * 4;
}

// hpZ (Note [ZeRO++]): this rank's 1/P piece of the full unit, kept until the update.
int64_t hpz_piece_bytes(const Plan& plan, size_t b) {
  const int64_t P = plan.policy.wire.hpz_partition;
  if (P <= 1 || !transient_unit(plan, b)) return 0;
  return plan.buffers[b].padded / P * int64_t(dtype_size(plan.policy.param_dtype));
}

}  // namespace

// Note [gradient blocks] (grad_blocks.cpp): two rounds in flight, each every rank's piece and
// this rank's output, in the wire dtype.
int64_t gradient_round_bytes(const Plan& plan, size_t b) {
  const BufferPlan& buf = plan.buffers.at(b);
  if (buf.block_elems == 0) return 0;
  const int64_t N = plan.world, E = buf.block_elems, rounds = std::min<int64_t>(2, block_rounds(buf, plan.world));
  return rounds * (N + 1) * E * int64_t(dtype_size(plan.policy.comm_dtype));
}

// And the temporaries of whole rows the rounds are made in.
int64_t gradient_block_bytes(const Plan& plan, size_t b) {
  const BufferPlan& buf = plan.buffers.at(b);
  return buf.block_elems == 0
             ? 0
             : gradient_round_bytes(plan, b) + buf.block_rows_elems * int64_t(dtype_size(plan.policy.param_dtype));
}

namespace {

struct Registry {
  std::mutex mu;
  std::vector<std::pair<size_t, BufferKind>> added;
  size_t next = 0;
};
Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

std::vector<BufferKind> buffer_kinds() {
  auto comm_dtype = [](const Plan& p) { return p.policy.comm_dtype; };
  auto param_dtype = [](const Plan& p) { return p.policy.param_dtype; };
  std::vector<BufferKind> kinds = {
      {"full gradient", Span::bucket, full_grad_bytes, false, nullptr, MemTag::comm},
      {"wire copy", Span::flight, wire_copy_bytes, true, comm_dtype, MemTag::comm},
      {"receive", Span::flight, receive_bytes, false, nullptr, MemTag::comm},
      {"qgZ buffers", Span::flight, quantized_gradient_bytes, false, nullptr, MemTag::comm},
      {"gathered unit", Span::unit, gathered_bytes, true, param_dtype, MemTag::param},
      {"widened copy", Span::unit, widened_bytes, false, nullptr, MemTag::param},
      {kParamStaging, Span::gathering, staging_bytes, false, nullptr, MemTag::param},
      {"qwZ packets", Span::gathering, int8_packet_bytes, false, nullptr, MemTag::comm},
      {"hpZ piece", Span::step, hpz_piece_bytes, false, nullptr, MemTag::param},
  };
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  for (auto& [id, k] : r.added) kinds.push_back(k);
  return kinds;
}

std::unique_ptr<BufferKindHandle> add_buffer_kind(BufferKind kind) {
  ZT_CHECK(kind.bytes, "[zero] buffer kind '", kind.name, "' has no bytes");
  ZT_CHECK(!kind.made || kind.span == Span::flight || kind.span == Span::unit,
           "[zero] only a flight or a unit's span makes buffers: '", kind.name, "'");
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  r.added.emplace_back(r.next, std::move(kind));
  return std::make_unique<BufferKindHandle>(r.next++);
}

BufferKindHandle::~BufferKindHandle() {
  Registry& r = registry();
  std::lock_guard lock(r.mu);
  std::erase_if(r.added, [&](const auto& e) { return e.first == id_; });
}

int64_t span_bytes(const std::vector<BufferKind>& kinds, Span span, const Plan& plan, size_t b) {
  int64_t n = 0;
  for (const BufferKind& k : kinds)
    if (k.span == span) n += k.bytes(plan, b);
  return n;
}

SpanHolds::SpanHolds(const Plan& plan, Span span, bool allocate, std::vector<BufferKind> kinds)
    : plan_(plan),
      span_(span),
      kinds_(std::move(kinds)),
      allocate_(allocate),
      open_(plan.buffers.size()),
      made_(plan.buffers.size()) {}

void SpanHolds::open(size_t b) {
  ZT_CHECK(!open_.at(b), "[zero] buffer ", b, " opened twice");
  std::vector<Tensor> made;  // all or nothing: an allocation that fails leaves b closed
  if (allocate_)
    for (const BufferKind& k : kinds_) {
      const int64_t n = k.made && k.span == span_ ? k.bytes(plan_, b) : 0;
      const DType dt = k.dtype ? k.dtype(plan_) : DType::f32;
      const int64_t es = int64_t(dtype_size(dt));
      ZT_CHECK(n % es == 0, "[zero] buffer kind '", k.name, "' asks ", n, " bytes, not whole ", dtype_name(dt),
               " elements");
      made.push_back(n > 0 ? Tensor::empty({n / es}, dt, k.tag, plan_.policy.device) : Tensor());
    }
  made_[b] = std::move(made);
  open_[b] = true;
}

void SpanHolds::close(size_t b) {
  open_.at(b) = false;
  made_[b].clear();
}

Tensor SpanHolds::made(size_t b, const std::string& name) const {
  for (size_t k = 0; k < made_[b].size(); ++k)
    if (kinds_[k].name == name) return made_[b][k];
  return Tensor();
}

BucketFlights::BucketFlights(const Plan& plan, const StepLimits& limits, bool allocate,
                             std::vector<BufferKind> kinds)
    : plan_(plan),
      holds_(plan, Span::flight, allocate, std::move(kinds)),
      limit_(limits.max_inflight_elems > 0 ? limits.max_inflight_elems : plan.grad_bucket_elems) {}

std::vector<size_t> BucketFlights::admit(size_t b) const {
  std::vector<size_t> first;
  int64_t elems = elems_;
  const int64_t n = plan_.buffers.at(b).padded;
  for (size_t f : order_) {
    if (elems + n <= limit_) break;
    first.push_back(f);
    elems -= plan_.buffers[f].padded;
  }
  return first;
}

void BucketFlights::launched(size_t b) {
  holds_.open(b);
  order_.push_back(b);
  elems_ += plan_.buffers[b].padded;
  bytes_ += span_bytes(holds_.kinds(), Span::bucket, plan_, b) + holds_.bytes(b);
}

bool BucketFlights::in_flight(size_t b) const { return std::find(order_.begin(), order_.end(), b) != order_.end(); }

void BucketFlights::finished(size_t b) {
  auto it = std::find(order_.begin(), order_.end(), b);
  ZT_CHECK(it != order_.end(), "[zero] bucket ", b, " finished but not in flight");
  order_.erase(it);
  holds_.close(b);
  elems_ -= plan_.buffers[b].padded;
  bytes_ -= span_bytes(holds_.kinds(), Span::bucket, plan_, b) + holds_.bytes(b);
}

// Stages 0-2 cut buckets from the last parameter, stage 3's units are in model order: backward
// completes them by their last parameter, last first; tied rows' dense parts launch first.
std::vector<size_t> backward_order(const Plan& plan) {
  std::vector<std::tuple<bool, size_t, size_t>> key;  // (not tied, last parameter, buffer)
  for (size_t b = 0; b < plan.buffers.size(); ++b) {
    size_t p = 0;
    for (const auto& s : plan.buffers[b].params) p = std::max(p, s.index);
    key.emplace_back(!plan.buffers[b].tied_rows, p, b);
  }
  std::sort(key.begin(), key.end(), [](const auto& x, const auto& y) {
    if (std::get<0>(x) != std::get<0>(y)) return std::get<0>(x) < std::get<0>(y);
    return std::get<1>(x) > std::get<1>(y);
  });
  std::vector<size_t> order;
  for (auto& k : key) order.push_back(std::get<2>(k));
  return order;
}

std::vector<StepEvent> backward_events(const Plan& plan, const StepLimits& limits,
                                       const std::vector<BufferKind>& kinds) {
  BucketFlights flights(plan, limits, false, kinds);
  std::vector<StepEvent> events;
  // Beside the flights: what a finished tied dense part keeps until the rows come (Note [tied
  // rows]), and the full gradients of shared buckets, open from their first use in backward (the
  // tied output's, first) until their launch.
  int64_t kept = 0, early = 0;
  for (size_t b = 0; b < plan.buffers.size(); ++b)
    if (plan.buffers[b].shared && !plan.buffers[b].tied_rows) early += span_bytes(kinds, Span::bucket, plan, b);
  auto finish = [&](size_t f) {
    flights.finished(f);
    if (plan.buffers[f].tied_rows)
      kept += span_bytes(kinds, Span::bucket, plan, f) + span_bytes(kinds, Span::flight, plan, f);
    events.push_back({StepEvent::finish, f, flights.bytes() + kept + early});
  };
  // Note [host gradient shard]: with gradients sent to the host, a buffer in blocks has its shard
  // from its first use's rounds until it goes down after its last use.
  auto host_shard = [&](size_t b) -> int64_t {
    if (!plan.policy.grads_to_host || plan.buffers[b].block_elems == 0) return 0;
    return plan.buffers[b].padded / plan.world * int64_t(dtype_size(plan.policy.grad_accum_dtype));
  };
  // Note [gradient blocks]: a shared buffer in blocks makes its first use's rounds as backward
  // starts (the tied output's), with nothing in flight yet.
  for (size_t b = 0; b < plan.buffers.size(); ++b)
    if (plan.buffers[b].shared && plan.buffers[b].block_elems > 0) {
      early += host_shard(b);
      events.push_back({StepEvent::first_gradient, b, early + gradient_block_bytes(plan, b)});
    }
  for (size_t k : backward_order(plan)) {
    if (plan.buffers[k].block_elems > 0) {  // a use's rounds, after what its reduction waits for
      for (size_t f : flights.admit(k)) finish(f);
      const int64_t shard = plan.buffers[k].shared ? 0 : host_shard(k);
      events.push_back(
          {StepEvent::first_gradient, k, flights.bytes() + kept + early + shard + gradient_block_bytes(plan, k)});
      if (plan.buffers[k].shared) early -= host_shard(k);  // handed down after its last use
      continue;
    }
    const int64_t full = span_bytes(kinds, Span::bucket, plan, k);
    const bool opened = plan.buffers[k].shared && !plan.buffers[k].tied_rows;
    // What the launch waits for finishes before the bucket's full gradient exists (stages 2-3;
    // at 0-1 the full gradient is a state and the bucket span holds nothing).
    for (size_t f : flights.admit(k)) finish(f);
    events.push_back({StepEvent::first_gradient, k, flights.bytes() + kept + early + (opened ? 0 : full)});
    if (opened) early -= full;  // from here on in the flight's bytes
    flights.launched(k);
    events.push_back({StepEvent::launch, k, flights.bytes() + kept + early});
    if (!limits.overlap_comm) finish(k);
  }
  while (!flights.idle()) finish(flights.in_flight().front());  // end_backward
  events.push_back({StepEvent::end, plan.buffers.size(), 0});   // the rows added, the dense parts freed
  return events;
}

std::vector<size_t> prefetch_window(const Plan& plan, const Stage3Limits& limits, size_t b, int dir, int64_t live,
                                    const std::function<bool(size_t)>& gathered) {
  std::vector<size_t> ahead;
  int64_t budget = limits.prefetch_elems;
  for (int64_t j = int64_t(b) + dir; j >= 0 && j < int64_t(plan.buffers.size()); j += dir) {
    const size_t u = size_t(j);
    if (u < plan.persistent.size() && plan.persistent[u]) continue;
    const int64_t n = plan.buffers[u].padded;
    const bool there = gathered(u);  // by an earlier prefetch, or kept: inside the window
    if (n > budget || (!there && live + n > limits.max_live_elems)) break;
    budget -= n;
    if (there) continue;
    ahead.push_back(u);
    live += n;
  }
  return ahead;
}

bool reused_within(const Plan& plan, const std::vector<size_t>& trace, size_t from, size_t b, int64_t max_reuse) {
  int64_t distance = 0;
  for (size_t i = from; i < trace.size() && distance < max_reuse; ++i) {
    if (trace[i] == b) return true;
    distance += plan.buffers[trace[i]].padded;
  }
  return false;
}

}  // namespace zt::zero
