#include "zt/zero/placement.h"

#include <algorithm>
#include <tuple>

#include "zt/core/allocator.h"
#include "zt/core/error.h"
#include "zt/zero/engine_options.h"

namespace zt::zero {

std::string describe(const Placement& p) {
  return "offload_optimizer " + offload_device(p.optimizer) + ", offload_param " + offload_device(p.param) +
         (p.lowered_limits ? ", one gradient bucket in flight and no stage-3 prefetch or reuse" : "") +
         (p.reduce_bucket > 0 ? ", reduce_bucket_size " + std::to_string(p.reduce_bucket) : "");
}

Placement placement_of(const EngineOptions& o) {
  return o.placement.value_or(configured_placement(o.zero, !o.device.is_cpu()));
}

EngineOptions with_placement(EngineOptions e, const Placement& at) {
  e.placement = at;
  if (at.lowered_limits) {
    e.max_inflight_reduce_elems = 1;  // launching a bucket first finishes the one before
    e.zero.stage3_prefetch_bucket_size = 0;
    e.zero.stage3_max_reuse_distance = 0;
  }
  if (at.reduce_bucket > 0) e.zero.reduce_bucket_size = at.reduce_bucket;
  return e;
}

namespace {

using Predict = std::function<PeakEstimate(const Placement&)>;

// Note [residence tiers]: the residences zero::place weighs, on the host (a CPU run: swap files are
// the offload) and beside a device (pinned host memory too), with their offload level: what leaves
// the compute device's memory, then what leaves memory.
constexpr Residence kOnHost[] = {Residence::memory, Residence::file};
constexpr Residence kBesideDevice[] = {Residence::memory, Residence::host, Residence::file};
int offloaded(Residence r) { return int(medium_of(r) != Medium::compute); }
int in_files(Residence r) { return int(medium_of(r) == Medium::files); }

// Note [budget choice]: on the host, run.memory_budget_mb holds the allocator's bytes in use. Disk
// is slower than memory and lowered limits cost overlap, so the configured run is tried first,
// then offload level by level (optimizer states, whose tiles stream once a step, before
// parameters, read at every gather), each with the configured limits before lowered ones. A budget
// no option meets fails before step 1 naming the smallest peak.
PlacementChoice place_on_host(const PlacementRequest& req, const Predict& predict) {
  const bool opt_auto = !req.optimizer, par_auto = !req.param && req.stage == 3;
  const Placement configured{req.optimizer.value_or(Residence::memory), req.param.value_or(Residence::memory)};
  if (req.host_cap <= 0) {
    PlacementChoice c{configured, predict(configured), {}};
    if (!req.optimizer || !req.param) c.lines.push_back("offload auto -> none: no run.memory_budget_mb to plan for");
    return c;
  }
  std::vector<Placement> order;
  auto add_level = [&](Residence opt, Residence par) {
    for (bool lowered : {false, true}) order.push_back({opt, par, lowered});
  };
  add_level(configured.optimizer, configured.param);
  const Residence opt = opt_auto ? Residence::file : configured.optimizer;
  if (opt != configured.optimizer) add_level(opt, configured.param);
  if (par_auto) add_level(opt, Residence::file);
  const std::string cap = format_bytes(size_t(req.host_cap)), head = "memory budget " + cap + ": ";
  for (const Placement& o : order) {
    const PeakEstimate p = predict(o);
    if (p.in_use() > req.host_cap) continue;
    PlacementChoice c{o, p, {}};
    const std::string fits = "predicted peak " + format_bytes(size_t(p.in_use())) + " per rank fits";
    auto line = [&](const std::string& what, const Placement& without) {
      c.lines.push_back(head + what + ": " + fits + "; " + describe(without) + " would need " +
                        format_bytes(size_t(predict(without).in_use())));
    };
    if (opt_auto) {
      if (o.optimizer != Residence::memory)
        line("offload_optimizer auto -> " + offload_device(o.optimizer), {Residence::memory, o.param, o.lowered_limits});
      else
        c.lines.push_back(head + "offload_optimizer auto -> none: " + fits);
    }
    if (par_auto) {
      if (o.param != Residence::memory)
        line("offload_param auto -> " + offload_device(o.param), {o.optimizer, Residence::memory, o.lowered_limits});
      else
        c.lines.push_back(head + "offload_param auto -> none: " + fits);
    }
    if (o.lowered_limits)
      line("one gradient bucket in flight and no stage-3 prefetch or reuse", {o.optimizer, o.param, false});
    if (c.lines.empty()) c.lines.push_back(head + fits + " (" + describe_peak(p) + ")");
    return c;
  }
  // Nothing allowed fits: name the smallest peak any setting gives, and the settings.
  Placement best;
  PeakEstimate bp;
  int64_t smallest = -1;
  for (Residence o : kOnHost)
    for (Residence par : kOnHost) {
      if (par != Residence::memory && req.stage != 3) continue;
      for (bool lowered : {false, true}) {
        const PeakEstimate p = predict({o, par, lowered});
        if (smallest < 0 || p.in_use() < smallest) {
          smallest = p.in_use();
          best = {o, par, lowered};
          bp = p;
        }
      }
    }
  const std::string named =
      req.host_cap_name.empty() ? "run.memory_budget_mb = " + std::to_string(req.host_cap >> 20) : req.host_cap_name;
  ZT_THROW_AS(ErrorKind::config, "[budget] ", named, " (", cap,
              " per rank) cannot hold this run: the smallest predicted peak is ", format_bytes(size_t(smallest)),
              " per rank, with ", describe(best), " (", describe_peak(bp),
              "); raise the budget, or lower the micro-batch, enable activation_checkpointing or a higher stage");
}

// Note [device plan]: on a device the two budgets plan together: the device's cap (run.device_memory_mb,
// else its whole memory: Note [device cap]) holds its predicted peak, run.memory_budget_mb the
// host's model-state bytes (pinned states, staging and swap tiles, stage 3's host shards) and the
// data. Offload devices "auto" take the first placement that fits both, in this order: the least
// leaving the device (nothing, the optimizer's states, then stage 3's parameter shards too), each
// in host memory before swap files. Every placement, the one the config names too, is tried with
// its limits, then lowered (one gradient bucket in flight, no stage-3 prefetch or reuse, a large
// gradient in rounds): a run that passed the plan does not die of memory at a later step. What
// no placement meets is one config error before step 1.
PlacementChoice place_beside_device(const PlacementRequest& req, const Predict& predict) {
  auto candidates = [](std::optional<Residence> r) {
    return r ? std::vector<Residence>{*r} : std::vector<Residence>(std::begin(kBesideDevice), std::end(kBesideDevice));
  };
  struct Option {
    Placement at;
    PeakEstimate peak;
    int64_t host = 0;  // the host's model-state bytes and the data
  };
  std::vector<Option> order;
  for (Residence o : candidates(req.optimizer))
    for (Residence p : candidates(req.param))
      if (!offloaded(p) || offloaded(o))  // the host updates what it holds
        for (bool lowered : {false, true}) order.push_back({{o, p, lowered, lowered ? req.lowered_bucket : 0}, {}, 0});
  // What leaves the device first, then what leaves the host: the optimizer's tiles stream once a
  // step, before the parameters, read at every gather (Note [budget choice]); lowered limits, which
  // cost every step its overlap, only where no placement fits with the configured ones.
  auto rank = [](const Option& x) {
    const Placement& a = x.at;
    return std::tuple{a.lowered_limits, offloaded(a.optimizer) + 2 * offloaded(a.param),
                      in_files(a.optimizer) + 2 * in_files(a.param)};
  };
  std::stable_sort(order.begin(), order.end(), [&](const auto& a, const auto& b) { return rank(a) < rank(b); });
  const bool configured = req.optimizer && req.param;
  const Option* least_device = nullptr;
  const Option* least_host = nullptr;
  for (Option& x : order) {
    x.peak = predict(x.at);
    x.host = x.peak.states.host + x.peak.host_data;
    const int64_t device = x.peak.in_use();
    const bool device_fits = req.device_cap == 0 || device <= req.device_cap;
    const bool host_fits = req.host_cap == 0 || x.host <= req.host_cap;
    if (!least_device || device < least_device->peak.in_use()) least_device = &x;
    if (device_fits && (!least_host || x.host < least_host->host)) least_host = &x;
    if (!device_fits || !host_fits) continue;
    PlacementChoice c{x.at, x.peak, {}};
    if (configured && !x.at.lowered_limits) return c;  // as the config names it, and it fits: nothing to say
    std::string line = detail::concat(
        "memory plan on ", req.device, ": ", describe(x.at), ": predicted device peak ", format_bytes(size_t(device)),
        req.device_cap > 0 ? " fits " + req.device_cap_name + " " + format_bytes(size_t(req.device_cap)) : "",
        ", host states and data ", format_bytes(size_t(x.host)),
        req.host_cap > 0 ? " fit run.memory_budget_mb " + format_bytes(size_t(req.host_cap)) : "");
    if (x.at.lowered_limits)
      line += "; with the configured limits the device would need " +
              format_bytes(size_t(predict({x.at.optimizer, x.at.param, false}).in_use()));
    c.lines.push_back(line);
    return c;
  }
  const std::string cap = req.device_cap_name == "run.device_memory_mb"
                              ? detail::concat("run.device_memory_mb=", req.device_cap >> 20, " (", req.device, ")")
                              : detail::concat(req.device_cap_name, " (", format_bytes(size_t(req.device_cap)), ")");
  ZT_CHECK(least_device != nullptr, "[memory] no placement to plan beside ", req.device);
  ZT_CHECK_AS(ErrorKind::config, least_host != nullptr, "[memory] ", cap,
              " fits no plan: the smallest predicted device peak is ",
              format_bytes(size_t(least_device->peak.in_use())), " per rank (", describe(least_device->at),
              "); raise run.device_memory_mb, or lower the micro-batch",
              configured ? ", or let zero_optimization's offload devices be auto" : "");
  ZT_THROW_AS(ErrorKind::config, "[memory] run.memory_budget_mb=", req.host_cap >> 20,
              " holds no plan that fits the device: the least the host needs is ",
              format_bytes(size_t(least_host->host)), " per rank (", describe(least_host->at),
              "); raise run.memory_budget_mb or run.device_memory_mb");
}

}  // namespace

PlacementChoice place(const PlacementRequest& given, const std::function<PeakEstimate(const Placement&)>& predict) {
  PlacementRequest req = given;
  // Below stage 3 every rank holds all parameters: "auto" means memory (and on the host, as ever,
  // so does a file); a device's configured offload_param stays, for the engine's config error.
  if (req.stage != 3 && (req.device.empty() || !req.param)) req.param = Residence::memory;
  return req.device.empty() ? place_on_host(req, predict) : place_beside_device(req, predict);
}

}  // namespace zt::zero
