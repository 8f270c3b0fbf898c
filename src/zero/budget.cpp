#include "zt/zero/budget.h"

#include <algorithm>
#include <deque>

#include "zt/core/allocator.h"
#include "zt/core/error.h"
#include "zt/ops/compress.h"

namespace zt::zero {

// Note [peak memory]: a rank's peak is its model states at rest (Plan::memory: by placement, so
// offloaded states count only their tile buffers) plus what exists only during a step, each
// term from the engine's own rules:
// - gradient buckets (stages 2-3, Note [gradient buckets]): replaying GradReducer in backward
//   order, a bucket's full gradient exists from its first gradient until its reduction finishes,
//   with its receive (and cast wire) buffer; at most max_inflight elements are in flight;
// - gathered units (stage 3): the unit running plus what ParamStore::prefetch gathers ahead
//   (stage3_prefetch_bucket_size, stage3_max_live_parameters), in both directions, or the units
//   that Note [reuse distance] keeps gathered between their forward and backward;
// - parameter files (stage 3): the shards staged while they are read in (one unit's without prefetch);
// - ZeRO++ (Note [ZeRO++]): hpZ's secondary pieces, 1/P of every unit that is not persistent; qwZ's
//   packets (this rank's and every rank's) beside each unit gathered ahead; qgZ's node averages,
//   packets sent and received and fp32 sum beside each bucket in flight;
// - activations at the micro-batch (the caller's formula per model kind), the data already
//   loaded, the shm slots, and workspace: the larger of the initialiser's f32 values and a
//   stage-1/2 publish copy.
// Where the model computes in f32 over 16-bit parameters (Note [f32 compute] in param_store.cpp),
// every gathered buffer has its widened copy: in the states (Plan::memory) and in `gathered`.
// The sum is what stays resident (the caching allocator keeps freed blocks, so terms that never
// coexist still add up) plus the shm slots; the OS adds the process baseline (libraries,
// threads: RSS minus allocator bytes, measured by `train` before the engine exists). A budget
// holds in_use(): the allocator hands cached blocks back before it refuses.
namespace {

// qgZ across M > 1 nodes (Note [wire plan]), for a bucket of n elements: the node averages (M
// shards, when L > 1), the packets out and in, and the fp32 sum of this rank's shard.
int64_t quantized_gradient_bytes(const Plan& plan, int64_t n) {
  const WirePlan& w = plan.policy.wire;
  if (w.gradient_bits == 0 || !plan.policy.shard_optimizer()) return 0;
  const int64_t M = w.nodes, s = n / plan.world, cb = int64_t(dtype_size(plan.policy.comm_dtype));
  return (w.local_size > 1 ? M * s * cb : 0) + 2 * M * ops::packet_words(s, w.gradient_bits) * 4 + s * 4;
}

int64_t bucket_peak(const Plan& plan, const PeakInput& in) {
  const Policy& pol = plan.policy;
  const int64_t fb = int64_t(dtype_size(pol.full_grad_dtype())), cb = int64_t(dtype_size(pol.comm_dtype));
  const int64_t limit = in.max_inflight_elems > 0 ? in.max_inflight_elems : plan.grad_bucket_elems;
  struct Flight {
    int64_t elems, bytes;
  };
  std::deque<Flight> flights;
  int64_t elems = 0, bytes = 0, peak = 0;
  for (size_t k = plan.buffers.size(); k-- > 0;) {  // backward visits the buffers last first
    const int64_t n = plan.buffers[k].padded;
    const int64_t full = pol.shard_gradients() ? n * fb : 0;  // stages 0-1: persistent, in states.grad
    peak = std::max(peak, bytes + full);
    while (!flights.empty() && elems + n > limit) {
      elems -= flights.front().elems;
      bytes -= flights.front().bytes;
      flights.pop_front();
    }
    const int64_t wire = pol.comm_dtype != pol.full_grad_dtype() ? n * cb : 0;
    const int64_t recv = (pol.shard_optimizer() ? n / plan.world * cb : 0) + quantized_gradient_bytes(plan, n);
    flights.push_back({n, full + wire + recv});
    elems += n;
    bytes += full + wire + recv;
    peak = std::max(peak, bytes);
    if (!in.overlap_comm) {
      elems = bytes = 0;
      flights.clear();
    }
  }
  return peak;
}

// Stage 3: the most elements gathered at once, and the most staging bytes of swapped shards
// being read in, over the unit running plus ParamStore::prefetch's window (both directions).
struct Window {
  int64_t elems = 0, staging = 0;
};
Window window_peak(const Plan& plan, const PeakInput& in) {
  const int64_t nb = int64_t(plan.buffers.size());
  auto kept = [&](int64_t i) { return size_t(i) < plan.persistent.size() && plan.persistent[size_t(i)]; };
  // On the CPU a swapped shard read into memory; on a device the copy of a shard that lives on
  // the host (read from its file, or pinned) uploaded for the all-gather.
  const int64_t pb = int64_t(dtype_size(plan.policy.param_dtype));
  const bool device = !plan.policy.device.is_cpu();
  auto staging = [&](int64_t i) {
    const size_t b = size_t(i);
    if (!plan.param_swapped(b) && !plan.param_on_host(b)) return int64_t(0);
    return device ? plan.buffers[b].padded / plan.world * pb : plan.param_staging_bytes(b);
  };
  Window peak;
  for (int dir : {1, -1})
    for (int64_t i = 0; i < nb; ++i) {
      if (kept(i)) continue;
      int64_t live = plan.buffers[size_t(i)].padded, ahead = in.prefetch_elems, staged = staging(i);
      for (int64_t j = i + dir; j >= 0 && j < nb; j += dir) {  // ParamStore::prefetch's rule
        if (kept(j)) continue;
        const int64_t n = plan.buffers[size_t(j)].padded;
        if (n > ahead || live + n > in.max_live_elems) break;
        live += n;
        ahead -= n;
        staged += staging(j);
      }
      peak.elems = std::max(peak.elems, live);
      peak.staging = std::max(peak.staging, staged);
    }
  return peak;
}

// Note [reuse distance] from the second step: a unit whose next use (its backward, after the later
// units' forward and backward) comes within stage3_max_reuse_distance elements stays gathered,
// while the gathered units stay within stage3_max_live_parameters.
int64_t gathered_elems(const Plan& plan, const PeakInput& in) {
  if (!plan.policy.shard_parameters()) return 0;
  int64_t kept = 0, after = 0, largest = 0;
  for (size_t i = plan.buffers.size(); i-- > 0;) {
    if (i < plan.persistent.size() && plan.persistent[i]) continue;
    const int64_t n = plan.buffers[i].padded;
    if (2 * after < in.max_reuse_elems) kept += n;
    after += n;
    largest = std::max(largest, n);
  }
  const int64_t reused = std::min(kept, in.max_live_elems + largest);
  return std::max(window_peak(plan, in).elems, reused);
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
  p.param_staging = pol.shard_parameters() ? window_peak(plan, in).staging : 0;
  p.grad_buckets = bucket_peak(plan, in);
  // Note [f32 compute]: each gathered unit's widened copy beside it
  const int64_t gb = pb + (pol.widens() ? int64_t(dtype_size(pol.compute_dtype)) : 0);
  p.gathered = pol.shard_parameters() ? gathered_elems(plan, in) * gb : 0;
  if (pol.shard_parameters() && pol.wire.int8_weights) {  // int8 packets: 1 + 4/256 bytes a value, this rank's and all
    const int64_t window = window_peak(plan, in).elems;
    p.gathered += (window + window / plan.world) * (ops::kQuantBlock + 4) / ops::kQuantBlock;
  }
  if (const int64_t P = pol.wire.hpz_partition; pol.shard_parameters() && P > 1)
    for (size_t i = 0; i < plan.buffers.size(); ++i)
      if (i >= plan.persistent.size() || !plan.persistent[i]) p.secondary += plan.buffers[i].padded / P * pb;
  p.activations = in.activations;
  const int64_t publish = pol.shard_optimizer() && !pol.shard_parameters() ? largest_shard * pb : 0;
  p.workspace = std::max(4 * in.largest_param, publish);
  p.comm_buffers = in.comm_buffers;
  p.data = in.data;
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
  add("workspace", p.workspace);
  add("comm buffers", p.comm_buffers);
  add("data", p.data);
  s += ": " + format_bytes(size_t(p.in_use())) + " at once, " + format_bytes(size_t(p.total())) + " resident";
  if (p.states.host > 0) s += "; beside it " + format_bytes(size_t(p.states.host)) + " of states in host memory";
  return s;
}

std::string BudgetOption::describe() const {
  return std::string("offload_optimizer ") + (optimizer_file ? "nvme" : "none") + ", offload_param " +
         (param_file ? "nvme" : "none") +
         (lowered_limits ? ", one gradient bucket in flight and no stage-3 prefetch or reuse" : "");
}

// Note [budget choice]: disk is slower than memory and lowered limits cost overlap, so the
// configured run is tried first, then offload level by level (optimizer states, whose tiles
// stream once a step, before parameters, read at every gather), each with the configured limits
// before lowered ones. A budget no option meets fails before step 1 naming the smallest peak.
BudgetChoice choose_offload(int64_t budget, bool optimizer_auto, bool param_auto, const BudgetOption& configured,
                            int stage, const std::function<PeakEstimate(const BudgetOption&)>& predict) {
  std::vector<BudgetOption> order;
  auto add_level = [&](bool opt, bool par) {
    for (bool lowered : {false, true}) order.push_back({opt, par, lowered});
  };
  add_level(configured.optimizer_file, configured.param_file);
  const bool opt = configured.optimizer_file || optimizer_auto;
  if (opt != configured.optimizer_file) add_level(opt, configured.param_file);
  if (param_auto && stage == 3 && !configured.param_file) add_level(opt, true);
  const std::string cap = format_bytes(size_t(budget));
  for (const BudgetOption& o : order) {
    const PeakEstimate p = predict(o);
    if (p.in_use() > budget) continue;
    BudgetChoice c{o, p, {}};
    const std::string head = "memory budget " + cap + ": ";
    const std::string fits = "predicted peak " + format_bytes(size_t(p.in_use())) + " per rank fits";
    auto line = [&](const std::string& what, const BudgetOption& without) {
      c.lines.push_back(head + what + ": " + fits + "; " + without.describe() + " would need " +
                        format_bytes(size_t(predict(without).in_use())));
    };
    if (optimizer_auto && !configured.optimizer_file) {
      if (o.optimizer_file)
        line("offload_optimizer auto -> nvme", {false, configured.param_file, o.lowered_limits});
      else
        c.lines.push_back(head + "offload_optimizer auto -> none: " + fits);
    }
    if (param_auto && stage == 3 && !configured.param_file) {
      if (o.param_file)
        line("offload_param auto -> nvme", {o.optimizer_file, false, o.lowered_limits});
      else
        c.lines.push_back(head + "offload_param auto -> none: " + fits);
    }
    if (o.lowered_limits)
      line("one gradient bucket in flight and no stage-3 prefetch or reuse", {o.optimizer_file, o.param_file, false});
    if (c.lines.empty()) c.lines.push_back(head + fits + " (" + describe_peak(p) + ")");
    return c;
  }
  // Nothing allowed fits: name the smallest peak any setting gives, and the settings.
  BudgetOption best{};
  int64_t smallest = -1;
  PeakEstimate bp;
  for (bool o : {false, true})
    for (bool par : {false, true}) {
      if (par && stage != 3) continue;
      for (bool lowered : {false, true}) {
        const PeakEstimate p = predict({o, par, lowered});
        if (smallest < 0 || p.in_use() < smallest) {
          smallest = p.in_use();
          best = {o, par, lowered};
          bp = p;
        }
      }
    }
  ZT_THROW_AS(ErrorKind::config, "[budget] run.memory_budget_mb = ", budget >> 20, " (", cap,
              " per rank) cannot hold this run: the smallest predicted peak is ", format_bytes(size_t(smallest)),
              " per rank, with ", best.describe(), " (", describe_peak(bp),
              "); raise the budget, or lower the micro-batch, enable activation_checkpointing or a higher stage");
}

}  // namespace zt::zero
