#include "memory_plan.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <limits>

#include <malloc.h>

#include "dry_run.h"
#include "models/model_kind.h"
#include "session.h"
#include "zt/core/allocator.h"
#include "zt/ops/ops.h"
#include "zt/train/memory_fit.h"
#include "zt/zero/placement.h"

namespace zt::apps {

namespace {

int64_t shm_slot_bytes(const RunContext& ctx) {
  if (!ctx.shm || ctx.world <= 1) return 0;
  // Two staging slots per rank, each reads its peers' (comm/shm.cpp).
  const char* kib = std::getenv("ZT_SHM_SLOT_KIB");
  const int64_t slot = kib && std::atol(kib) > 0 ? int64_t(std::atol(kib)) << 10 : int64_t(1) << 20;
  return 2 * int64_t(ctx.world) * slot;
}

// Note [host plan]: beside a device the OS sees the host's share of a run: the process, the data,
// the states in pinned host memory with their staging shards (states.host), the shm slots, and the
// pinned copies of staged collectives (host_staging). On sim the device's memory is this
// process's pages too.
int64_t host_resident(const zero::PeakEstimate& p, Device device, const RunContext& ctx) {
  if (device.is_cpu()) return p.total();
  const int64_t sim = device.type == DeviceType::sim ? p.total() : 0;
  return p.host_data + p.states.host + shm_slot_bytes(ctx) + p.host_staging + sim;
}

// Note [batch prefetch]: on a device the next micro-batch is there beside the one computing, and
// two are pinned on the host (the one sent ahead, the sources of the last one taken).
int64_t micro_batch_bytes(const config::Config& c, int64_t micro) {
  const ModelKind& k = model_kind(c);
  if (k.input_features) return micro * (k.input_features(c) * 4 + 4);  // f32 features, an i32 label
  return micro * k.rows_per_sample(c) * 12;                            // per token at most i32 ids, mask and target
}

}  // namespace

zero::PeakEstimate predict_run_peak(nn::Module& model, const config::Config& c, const zero::EngineOptions& given,
                                    const config::BatchSizes& bs, const RunContext& ctx) {
  zero::EngineOptions opts = given;
  opts.f32_compute = ctx.f32_compute;
  const zero::Plan plan = zero::plan_model(model, opts, ctx.world, ctx.local_size);
  zero::PeakInput in;
  static_cast<zero::StepLimits&>(in) = zero::step_limits(opts);
  in.largest_param = train::largest_param(model);
  const MeasuredActivations act = measure_activations(
      c, {bs.micro, bs.accumulation, ctx.eval_batch, opts.f32_compute, opts.zero.stage, opts.zero.reduce_bucket_size});
  in.activations = act.peak;
  in.activation_cache = act.resident - act.peak;
  in.data = opts.device.is_cpu() ? ctx.data_bytes : 0;  // beside a device the data stays on the host
  in.staged_collectives = ctx.staged;
  if (opts.device.is_cpu()) in.comm_buffers = shm_slot_bytes(ctx);  // host memory, outside a device's peak
  const int64_t batch = opts.device.is_cpu() ? 0 : micro_batch_bytes(c, bs.micro);
  in.activations += 2 * batch;  // the one computing and the next, sent ahead during its forward
  zero::PeakEstimate p = zero::predict_peak(plan, in);
  p.host_staging += 2 * batch;
  if (!opts.device.is_cpu()) p.host_data = ctx.data_bytes;
  return p;
}

namespace {

constexpr const char* kSwapped = "the states are in swap files (a snapshot would hold them in memory)";
// The offload devices as resolved (plan_memory names "auto"'s choice): states in swap files.
bool states_swapped(const config::Config& c) {
  return c.zero.offload_optimizer.device == "nvme" || c.zero.offload_param.device == "nvme";
}

// Note [background save] in ckpt: checkpoint.async resolved to "true" or "false". A snapshot
// holds the states in host memory, so auto saves in the foreground where they live in swap files
// or where the snapshot does not fit the budget beside the run's peak; "true" there is an error.
void plan_checkpoint_snapshot(MemoryPlan& mp, nn::Module& model, const RunContext& ctx) {
  config::CheckpointConfig& ck = mp.cfg.checkpoint;
  if (ck.every_steps <= 0) {
    ck.async = "false";
    return;
  }
  const zero::Plan plan = zero::plan_model(model, mp.options, ctx.world);
  const int64_t bytes = plan.checkpoint_bytes(), budget = mp.cfg.run.memory_budget_mb << 20;
  std::string why_not;
  if (states_swapped(mp.cfg))
    why_not = kSwapped;
  else if (budget > 0 && mp.peak.in_use() + bytes > budget)
    why_not = "its snapshot of " + format_bytes(size_t(bytes)) + " per rank does not fit run.memory_budget_mb (" +
              format_bytes(size_t(budget)) + ") beside the run's " + format_bytes(size_t(mp.peak.in_use()));
  ZT_CHECK_AS(ErrorKind::config, ck.async != "true" || why_not.empty(), "[config] checkpoint.async=true: ", why_not,
              "; set checkpoint.async to false or auto");
  if (!why_not.empty()) {
    if (ck.async == "auto") mp.lines.push_back("checkpoints in the foreground: " + why_not);
    ck.async = "false";
    return;
  }
  if (ck.async == "false") return;
  ck.async = "true";
  mp.peak.checkpoint_snapshot = bytes;  // the start line says so
}

}  // namespace

// Note [placement choice]: zero::place resolves "auto" against the budgets; the config then
// names the chosen devices, so that the engine, the start record and a resumed run see them.
MemoryPlan plan_memory(const config::Config& c, nn::Module& model, const config::BatchSizes& bs,
                       const RunContext& ctx) {
  MemoryPlan mp;
  mp.cfg = c;
  const zero::EngineOptions configured = engine_options(c, bs);
  zero::check_engine_options(configured);  // what the engine refuses, before its plan
  const Device device = configured.device;
  config::OffloadConfig &opt = mp.cfg.zero.offload_optimizer, &par = mp.cfg.zero.offload_param;
  zero::PlacementRequest req = train::placement_request(configured);  // Note [memory fit]
  req.device_cap = device_cap_bytes(c, device, ctx.device_capacity);  // Note [device cap]
  if (!device.is_cpu() && c.run.device_memory_mb == 0) req.device_cap_name = detail::concat(device, "'s memory");
  // Stage 3 beside a device: lowered limits send the largest gradient in 16 rounds or more, where the
  // configured bucket would hold it whole (a tied embedding's, at GPT's vocabulary).
  const int64_t largest = train::largest_param(model);
  if (!device.is_cpu() && c.zero.stage == 3 && largest / 16 < c.zero.reduce_bucket_size)
    req.lowered_bucket = std::max<int64_t>(1, largest / 16);
  req.host_cap = c.run.memory_budget_mb << 20;
  const zero::PlacementChoice choice = zero::place(req, [&](const zero::Placement& at) {
    return predict_run_peak(model, c, zero::with_placement(configured, at), bs, ctx);
  });
  if (opt.device == "auto") opt.device = zero::offload_device(choice.placement.optimizer);
  if (par.device == "auto") par.device = zero::offload_device(choice.placement.param);
  mp.placement = choice.placement;
  mp.lines = choice.lines;
  mp.options = zero::with_placement(engine_options(mp.cfg, bs), choice.placement);
  mp.options.f32_compute = ctx.f32_compute;
  mp.peak = choice.peak;
  plan_checkpoint_snapshot(mp, model, ctx);
  return mp;
}

void check_checkpoint_async(const config::Config& c) {
  ZT_CHECK_AS(ErrorKind::config, c.checkpoint.async != "true" || c.checkpoint.every_steps <= 0 || !states_swapped(c),
              "[config] checkpoint.async=true: ", kSwapped, "; set checkpoint.async to false or auto");
}

nlohmann::json placement_json(const zero::Placement& at) {
  nlohmann::json j = {{"offload_optimizer", zero::offload_device(at.optimizer)},
                      {"offload_param", zero::offload_device(at.param)},
                      {"lowered_limits", at.lowered_limits}};
  if (at.reduce_bucket > 0) j["reduce_bucket_size"] = at.reduce_bucket;
  return j;
}

nlohmann::json peak_json(const zero::PeakEstimate& p) {
  const zero::MemoryEstimate& s = p.states;
  return {{"param", s.param},
          {"grad", s.grad},
          {"master", s.master},
          {"optim", s.optim},
          {"host", s.host},  // of those four, what lives in host memory beside a device (not in the totals)
          {"grad_buckets", p.grad_buckets},
          {"gathered", p.gathered},
          {"hpz_pieces", p.secondary},
          {"param_staging", p.param_staging},
          {"activations", p.activations},
          {"activation_cache", p.activation_cache},
          {"workspace", p.workspace},
          {"comm_buffers", p.comm_buffers},
          {"data", p.data},
          {"host_data", p.host_data},
          {"checkpoint_snapshot", p.checkpoint_snapshot},
          {"host_staging", p.host_staging},
          {"in_use", p.in_use()},
          {"total", p.total()}};
}

MemoryPlan plan_before_step1(const config::Config& c, nn::Module& model, const config::BatchSizes& bs, RunContext ctx) {
  // Under a budget the allocator hands cached blocks back; from mmap (not glibc's heap) they
  // leave the process's RSS, so the OS peak is bounded by the budget too.
  if (c.run.memory_budget_mb > 0) mallopt(M_MMAP_THRESHOLD, 1 << 20);
  warm_up_runtime(engine_options(c, bs).dtype);
  const Rss before = read_rss();
  ctx.data_bytes = int64_t(Allocator::global().stats().total_current);
  MemoryPlan mp = plan_memory(c, model, bs, ctx);
  mp.record = peak_json(mp.peak);
  mp.record["placement"] = placement_json(mp.placement);
  mp.record["process_baseline"] = before.now - ctx.data_bytes;
  mp.record["rss_peak_before"] = before.peak;  // e.g. reading the data: the run's peak when larger
  const int64_t budget = c.run.memory_budget_mb << 20;
  const int64_t held = host_resident(mp.peak, mp.options.device, ctx) - mp.peak.comm_buffers;
  mp.record["predicted_rss"] = before.now - ctx.data_bytes + mp.peak.comm_buffers + mp.peak.checkpoint_snapshot +
                               (budget > 0 && mp.options.device.is_cpu() ? std::min(held, budget) : held);
  // What the budget covers, said before step 1: the OS also counts the process itself.
  if (budget > 0)
    mp.lines.push_back(
        "memory budget " + format_bytes(size_t(budget)) +
        " holds zerotrain's allocations (model states, buffers, activations, the data); the process "
        "adds its baseline of " +
        format_bytes(size_t(std::max<int64_t>(0, before.now - ctx.data_bytes))) + " (libraries, threads)" +
        (mp.peak.comm_buffers > 0 ? " and " + format_bytes(size_t(mp.peak.comm_buffers)) + " of shm slots"
                                  : std::string()) +
        ": the OS should see up to " + format_bytes(size_t(mp.record["predicted_rss"].get<int64_t>())) + " per rank");
  mp.record["choices"] = mp.lines;  // the budget's own line included
  return mp;
}

void warm_up_runtime(DType dtype) {
  const Tensor a = ops::cast(Tensor::zeros({256, 256}), dtype);
  for (bool t : {false, true}) (void)ops::matmul(a, a, t, !t);
}

int64_t eval_batch_of(const config::Config& c, int64_t micro) {
  if (!c.run.eval_at_end && c.data.eval_every <= 0) return 0;
  return model_kind(c).eval_batch(c, micro);
}

Rss read_rss() {
  Rss r;
  std::ifstream f("/proc/self/status");
  for (std::string line; std::getline(f, line);) {
    const bool now = line.rfind("VmRSS:", 0) == 0, peak = line.rfind("VmHWM:", 0) == 0;
    if (now || peak) (now ? r.now : r.peak) = std::atoll(line.c_str() + 6) * 1024;  // "VmRSS:   1234 kB"
  }
  return r;
}

}  // namespace zt::apps
