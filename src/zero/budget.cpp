#include "zt/zero/budget.h"

#include <algorithm>

#include "zt/core/allocator.h"
#include "zt/core/error.h"
#include "zt/zero/schedule.h"

namespace zt::zero {

// Note [peak memory]: a rank's peak is its model states at rest (Plan::memory: by placement, so
// offloaded states count only their tile buffers) plus what exists only during a step: the
// buffer kinds of Note [step schedule], summed over what the engine's own rules hold at once:
// - gradient buckets (Note [gradient buckets]): backward's events played through the reducer's
//   rule, each bucket's kinds (at stages 2-3 its full gradient from its first gradient; in flight
//   its wire copy, receive and qgZ buffers);
// - gathered units (stage 3): each unit's span kinds (the unit, its widened copy) over the unit
//   running plus what ParamStore::prefetch gathers ahead (prefetch_window), in both directions,
//   or over the units that Note [reuse distance] keeps gathered between their forward and
//   backward; plus the window's gathering kinds: parameter staging (swapped or host-resident
//   shards brought in) and qwZ's packets;
// - hpZ (Note [ZeRO++]): the step span's kinds of every unit (its 1/P piece until the update);
// - activations at the micro-batch (the caller's formula per model kind), the data already
//   loaded, the shm slots, and workspace: the larger of the initialiser's f32 values and a
//   stage-1/2 publish copy.
// Where the model computes in f32 over 16-bit parameters (Note [f32 compute] in param_store.cpp),
// every gathered buffer has its widened copy: in the states (Plan::memory) or a unit's span.
// The sum is what stays resident (the caching allocator keeps freed blocks, so terms that never
// coexist still add up) plus the shm slots; the OS adds the process baseline (libraries,
// threads: RSS minus allocator bytes, measured by `train` before the engine exists). A budget
// holds in_use(): the allocator hands cached blocks back before it refuses.
namespace {

// The buckets' peak: backward's events as Note [step schedule] plays them.
int64_t bucket_peak(const Plan& plan, const PeakInput& in, const std::vector<BufferKind>& kinds) {
  int64_t peak = 0;
  for (const StepEvent& e : backward_events(plan, in, kinds)) peak = std::max(peak, e.held);
  return peak;
}

// Stage 3, over the unit running plus ParamStore::prefetch's window (both directions): the most
// elements gathered at once, and the most bytes of their unit spans, of their gathers' parameter
// staging and of their other gathering kinds (Note [step schedule]).
struct Window {
  int64_t elems = 0, bytes = 0, staging = 0, gathering = 0;
};
Window window_peak(const Plan& plan, const PeakInput& in, const std::vector<BufferKind>& kinds) {
  Window peak;
  auto none = [](size_t) { return false; };
  for (int dir : {1, -1})
    for (size_t i = 0; i < plan.buffers.size(); ++i) {
      if (i < plan.persistent.size() && plan.persistent[i]) continue;
      std::vector<size_t> live = prefetch_window(plan, in, i, dir, plan.buffers[i].padded, none);
      live.push_back(i);
      Window w;
      for (size_t u : live) {
        w.elems += plan.buffers[u].padded;
        w.bytes += span_bytes(kinds, Span::unit, plan, u);
        for (const BufferKind& k : kinds)
          if (k.span == Span::gathering) (k.name == kParamStaging ? w.staging : w.gathering) += k.bytes(plan, u);
      }
      peak.elems = std::max(peak.elems, w.elems);
      peak.bytes = std::max(peak.bytes, w.bytes);
      peak.staging = std::max(peak.staging, w.staging);
      peak.gathering = std::max(peak.gathering, w.gathering);
    }
  return peak;
}

// Note [reuse distance] from the second step: a unit whose next use (its backward, after the later
// units' forward and backward) comes within stage3_max_reuse_distance elements stays gathered,
// while the gathered units stay within stage3_max_live_parameters plus the one in use: the bytes
// of the units kept, nearest the end first, up to that many elements (the last one in part).
int64_t reused_bytes(const Plan& plan, const PeakInput& in, const std::vector<BufferKind>& kinds) {
  std::vector<size_t> trace;  // a step's uses: the units forward, then backward
  for (size_t i = 0; i < plan.buffers.size(); ++i)
    if (i >= plan.persistent.size() || !plan.persistent[i]) trace.push_back(i);
  const size_t forward = trace.size();
  for (size_t k = forward; k-- > 0;) trace.push_back(trace[k]);
  int64_t largest = 0;
  std::vector<size_t> kept;
  for (size_t k = 0; k < forward; ++k) {  // after its forward use, ParamStore keeps a unit reused soon
    largest = std::max(largest, plan.buffers[trace[k]].padded);
    if (reused_within(plan, trace, k + 1, trace[k], in.max_reuse_elems)) kept.push_back(trace[k]);
  }
  const int64_t cap = in.max_live_elems + largest;
  int64_t elems = 0, bytes = 0;
  for (size_t j = kept.size(); j-- > 0 && elems < cap;) {
    const int64_t n = plan.buffers[kept[j]].padded, part = std::min(n, cap - elems);
    const int64_t unit = span_bytes(kinds, Span::unit, plan, kept[j]);
    bytes += unit / n * part + (part == n ? unit % n : 0);
    elems += part;
  }
  return bytes;
}

// Note [staged group]: each staged collective's pinned input and output live from its launch to
// its finish: the reductions in flight (one bucket's worth, or the one bucket larger than that;
// in place at stage 0), and a stage-3 window's gathers beside them or at stages 1-2 the largest
// buffer's publish after backward. The pinned allocator keeps the blocks: this is what it holds.
int64_t host_staging_bytes(const Plan& plan, const PeakInput& in, int64_t window_elems) {
  const Policy& pol = plan.policy;
  const int64_t N = plan.world, cb = int64_t(dtype_size(pol.comm_dtype)), pb = int64_t(dtype_size(pol.param_dtype));
  int64_t largest = 0, reduced = 0, all = 0, blocks = 0;  // blocks: Note [gradient blocks]'s rounds
  for (size_t i = 0; i < plan.buffers.size(); ++i) {
    const int64_t n = plan.buffers[i].padded;
    largest = std::max(largest, n);
    if (plan.buffers[i].block_elems > 0)
      blocks = std::max(blocks, gradient_round_bytes(plan, i));
    else
      reduced = std::max(reduced, n), all += n;
  }
  const int64_t limit = in.max_inflight_elems > 0 ? in.max_inflight_elems : plan.grad_bucket_elems;
  const int64_t flying = std::max(reduced, std::min(limit, all));
  const int64_t reduce = std::max(blocks, pol.shard_optimizer() ? flying * cb + flying / N * cb : flying * cb);
  if (pol.shard_parameters()) return reduce + window_elems * pb + window_elems / N * pb;
  return std::max(reduce, pol.shard_optimizer() ? largest * pb + largest / N * pb : 0);
}

}  // namespace

PeakEstimate predict_peak(const Plan& plan, const PeakInput& in) {
  const Policy& pol = plan.policy;
  const int64_t pb = int64_t(dtype_size(pol.param_dtype));
  PeakEstimate p;
  p.states = plan.memory();
  int64_t largest_shard = 0;
  for (const BufferPlan& b : plan.buffers)
    largest_shard = std::max(largest_shard, pol.shard_optimizer() ? b.padded / plan.world : b.padded);
  const std::vector<BufferKind> kinds = buffer_kinds();  // one snapshot of Note [step schedule]'s table
  p.grad_buckets = bucket_peak(plan, in, kinds);
  int64_t window_elems = 0;
  if (pol.shard_parameters()) {  // the stage-3 spans' kinds
    const Window window = window_peak(plan, in, kinds);
    window_elems = window.elems;
    p.param_staging = window.staging;
    // The gathered units with their spans' buffers (Note [f32 compute]: the widened copies), and
    // the window's gathers in flight (qwZ's packets).
    p.gathered = std::max(window.bytes, reused_bytes(plan, in, kinds)) + window.gathering;
    for (size_t b = 0; b < plan.buffers.size(); ++b) p.secondary += span_bytes(kinds, Span::step, plan, b);
  }
  p.activations = in.activations;
  p.activation_cache = in.activation_cache;
  const int64_t publish = pol.shard_optimizer() && !pol.shard_parameters() ? largest_shard * pb : 0;
  p.workspace = std::max(4 * in.largest_param, publish);
  p.comm_buffers = in.comm_buffers;
  p.data = in.data;
  if (in.staged_collectives) p.host_staging = host_staging_bytes(plan, in, window_elems);
  return p;
}

std::string describe_peak(const PeakEstimate& p) {
  std::string s;
  auto add = [&](const char* name, int64_t v) {
    if (v <= 0) return;
    s += (s.empty() ? "" : ", ") + std::string(name) + " " + format_bytes(size_t(v));
  };
  add("states", p.states.on_device());
  add("gradient buckets", p.grad_buckets);
  add("gathered units", p.gathered);
  add("hpZ pieces", p.secondary);
  add("parameter staging", p.param_staging);
  add("activations", p.activations);
  add("their cached blocks", p.activation_cache);
  add("workspace", p.workspace);
  add("comm buffers", p.comm_buffers);
  add("data", p.data);
  s += ": " + format_bytes(size_t(p.in_use())) + " at once, " + format_bytes(size_t(p.total())) + " resident";
  if (p.states.host > 0) s += "; beside it " + format_bytes(size_t(p.states.host)) + " of states in host memory";
  return s;
}

}  // namespace zt::zero
