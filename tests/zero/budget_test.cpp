// The peak predictor's terms (Note [peak memory]) and the budget's choice (Note [budget choice]):
// each side of every branch, on plans of a model of eight 1M-element parameters at N = 2.
#include <gtest/gtest.h>

#include <optional>
#include <utility>

#include "common/error_of.h"
#include "zt/core/allocator.h"
#include "zt/zero/budget.h"
#include "zt/zero/placement.h"
#include "zt/zero/schedule.h"

using namespace zt::zero;
using zt::DType;

namespace {

constexpr int64_t kMiB = int64_t(1) << 20;

PlanInput eight_params() {
  PlanInput in;
  for (size_t i = 0; i < 8; ++i) {
    in.numels.push_back(int64_t(1) << 20);
    in.units.push_back({i});
  }
  in.persistence_threshold = 0;
  return in;
}

// A rung of the budget's ladder on the host: the optimizer's states and the parameters in swap
// files or memory, the limits lowered or not.
struct Option {
  bool optimizer_file = false, param_file = false, lowered_limits = false;
};
Option option_of(const Placement& p) {
  return {p.optimizer == Residence::file, p.param == Residence::file, p.lowered_limits};
}

Plan plan_of(int stage, const Option& o, DType dtype = DType::f32) {
  Policy pol = make_policy(stage, dtype, std::nullopt, std::nullopt);
  pol.optimizer_residence = o.optimizer_file ? Residence::file : Residence::memory;
  pol.param_residence = o.param_file && stage == 3 ? Residence::file : Residence::memory;
  pol.swap.tile_elems = 64 * 1024;
  return make_plan(eight_params(), pol, 2);
}

// `p` with the wire plan (Note [wire plan]) of these ZeRO++ keys at L ranks per node.
Plan with_wire(Plan p, bool int8_weights, int gradient_bits, int64_t hpz, int local_size) {
  zt::config::ZeroConfig z;
  z.zero_quantized_weights = int8_weights;
  z.zero_quantized_gradients = gradient_bits > 0;
  if (gradient_bits > 0) z.zero_quantized_gradients_bits = gradient_bits;
  z.zero_hpz_partition_size = hpz;
  p.policy.wire = plan_wire(z, p.world, local_size);
  return p;
}

PeakInput limits_of(const Option& o) {
  PeakInput in;
  in.activations = 10 * kMiB;
  in.largest_param = int64_t(1) << 20;
  if (o.lowered_limits) {
    in.max_inflight_elems = 1;
    in.prefetch_elems = 0;
    in.max_reuse_elems = 0;
  }
  return in;
}

PeakEstimate predict(int stage, const Option& o) { return predict_peak(plan_of(stage, o), limits_of(o)); }

}  // namespace

TEST(PeakMemory, StatesAreThePlansAndTransientsFollowTheStage) {
  for (int stage = 0; stage <= 3; ++stage) {
    const PeakEstimate p = predict(stage, {});
    EXPECT_EQ(p.states.total(), plan_of(stage, {}).memory().total()) << stage;
    EXPECT_EQ(p.activations, 10 * kMiB);
    // The initialiser's f32 values of one parameter, or at stage 1 the publish copy of the one bucket's shard.
    EXPECT_EQ(p.workspace, stage == 1 ? plan_of(1, {}).buffers[0].padded / 2 * 4 : 4 << 20) << stage;
    // fp32 stage 0 all-reduces the persistent gradient in place; stage 1 receives its shard;
    // stages 2-3 also hold the transient full gradients.
    EXPECT_EQ(p.grad_buckets > 0, stage >= 1) << stage;
    if (stage == 1) {
      EXPECT_EQ(p.grad_buckets, plan_of(1, {}).buffers[0].padded / 2 * 4);
    }
    EXPECT_EQ(p.gathered > 0, stage == 3) << stage;
    EXPECT_EQ(p.param_staging, 0);
    EXPECT_EQ(p.total(), p.states.total() + p.grad_buckets + p.gathered + p.activations + p.workspace);
    // A budget holds what is in use at once: the initialiser's values are gone before step 1.
    EXPECT_EQ(p.in_use(), p.states.total() + std::max(p.workspace, p.grad_buckets + p.gathered + p.activations));
  }
  // bf16 at stage 1: the gradient is cast for the wire and half of it comes back.
  const PeakEstimate b = predict_peak(plan_of(1, {}, DType::bf16), limits_of({}));
  EXPECT_GT(b.grad_buckets, 0);
}

TEST(PeakMemory, ABucketInFlightIsItsFullGradientAndItsShard) {
  const Plan plan = plan_of(2, {});
  const int64_t n = plan.buffers[0].padded;
  PeakInput one = limits_of({false, false, true}), many = limits_of({});
  many.max_inflight_elems = 8 * n;
  // One at a time: the last reduction finishes before the next bucket's gradient exists.
  EXPECT_EQ(predict_peak(plan, one).grad_buckets, 4 * n + 4 * n / 2);
  EXPECT_EQ(predict_peak(plan, many).grad_buckets, 8 * (4 * n + 4 * n / 2));
  many.overlap_comm = false;  // each reduction finishes before backward goes on
  EXPECT_EQ(predict_peak(plan, many).grad_buckets, 4 * n + 4 * n / 2);
}

TEST(PeakMemory, Stage3GathersWhatPrefetchAndReuseAllow) {
  const Plan plan = plan_of(3, {});
  const int64_t n = plan.buffers[0].padded, unit = n * 4;
  PeakInput in = limits_of({});
  in.max_reuse_elems = 0;                                // every use gathers (ZeRO's 3 gathers a step)
  EXPECT_EQ(predict_peak(plan, in).gathered, 8 * unit);  // 50M elements of prefetch take every unit
  in.max_live_elems = 3 * n;
  EXPECT_EQ(predict_peak(plan, in).gathered, 3 * unit);
  in.prefetch_elems = 0;
  EXPECT_EQ(predict_peak(plan, in).gathered, unit);
  // Note [reuse distance]: a unit whose backward comes within the distance stays gathered: the
  // last unit's comes next, the one before after 2 units' uses, ...
  in.max_live_elems = 1'000'000'000;
  in.max_reuse_elems = 2 * n + 1;
  EXPECT_EQ(predict_peak(plan, in).gathered, 2 * unit);
  in.max_reuse_elems = 1'000'000'000;
  EXPECT_EQ(predict_peak(plan, in).gathered, 8 * unit);
  in.max_live_elems = 3 * n;  // kept while the gathered units are within the limit: one more gathers
  EXPECT_EQ(predict_peak(plan, in).gathered, 4 * unit);
}

// Note [ZeRO++]: hpZ keeps 1/P of every unit that is not persistent until the update.
TEST(PeakMemory, HpzPiecesAreOnePthOfTheUnits) {
  PeakInput in = limits_of({});
  const Plan plan = plan_of(3, {});
  EXPECT_EQ(predict_peak(plan, in).secondary, 0);
  const PeakEstimate p = predict_peak(with_wire(plan, false, 0, 2, 1), in);
  EXPECT_EQ(p.secondary, 8 * plan.buffers[0].padded / 2 * 4);
  EXPECT_EQ(p.total() - predict_peak(plan, limits_of({})).total(), p.secondary);
  EXPECT_EQ(predict_peak(with_wire(plan_of(2, {}), false, 0, 2, 1), in).secondary, 0);  // below stage 3 nothing is gathered
}

// qwZ: int8 packets (1 + 4/256 bytes a value) of the window's units, this rank's shard and all;
// qgZ: only across nodes (world 2, one rank per node): packets out and in, and the fp32 sum.
TEST(PeakMemory, QuantizedTrafficAddsItsPackets) {
  const Plan plan = plan_of(3, {});
  const int64_t n = plan.buffers[0].padded;
  PeakInput in = limits_of({});
  in.max_reuse_elems = 0;
  in.prefetch_elems = 0;  // one unit gathered at a time
  const PeakEstimate plain = predict_peak(plan, in);
  EXPECT_EQ(predict_peak(with_wire(plan, true, 0, 1, 1), in).gathered - plain.gathered, (n + n / 2) * 260 / 256);
  // one node of both ranks: nothing crosses, and the wire plan says dense
  const Plan one_node = with_wire(plan, false, 4, 1, 2);
  EXPECT_EQ(one_node.policy.wire.gradient_bits, 0);
  EXPECT_EQ(predict_peak(one_node, in).grad_buckets, plain.grad_buckets);
  const Plan two_nodes = with_wire(plan, false, 4, 1, 1);
  EXPECT_EQ(two_nodes.policy.wire.gradient_bits, 4);
  EXPECT_EQ(two_nodes.policy.wire.nodes, 2);
  const int64_t s = n / 2, packet = (4 * (s / 256) + s / 2 + 3) / 4 * 4;
  EXPECT_EQ(predict_peak(two_nodes, in).grad_buckets - plain.grad_buckets, 2 * 2 * packet + 4 * s);
}

TEST(PeakMemory, OffloadMovesStatesToFilesAndKeepsTheirBuffers) {
  const PeakEstimate mem = predict(3, {}), opt = predict(3, {true, false, false}),
                     both = predict(3, {true, true, true});
  const Plan p = plan_of(3, {true, false, false});
  EXPECT_EQ(opt.states.optim, p.policy.swap.buffers * p.swap_slot_bytes());
  EXPECT_LT(opt.total(), mem.total());
  const int64_t shards = 8 * plan_of(3, {}).buffers[0].padded / 2 * 4;
  EXPECT_EQ(both.states.param, opt.states.param - shards);  // at rest on disk
  const Plan files = plan_of(3, {true, true, false});
  EXPECT_EQ(both.param_staging, files.param_staging_bytes(0));  // without prefetch one unit's shard is staged
  EXPECT_EQ(files.param_staging_bytes(0), shards / 8 + 4096);
  EXPECT_LT(both.total(), predict(3, {true, false, true}).total());
  // Prefetching stages every shard of its window while it is read in.
  EXPECT_EQ(predict(3, {true, true, false}).param_staging, 8 * files.param_staging_bytes(0));
  EXPECT_EQ(predict(2, {true, true, false}).param_staging, 0);  // parameters go to files at stage 3 only
}

namespace {
// Predicted totals of the six options at stage 3, in zero::place's order on the host.
struct Ladder {
  int64_t none, none_low, opt, opt_low, both, both_low;
};
Ladder ladder() {
  return {predict(3, {false, false, false}).in_use(), predict(3, {false, false, true}).in_use(),
          predict(3, {true, false, false}).in_use(),  predict(3, {true, false, true}).in_use(),
          predict(3, {true, true, false}).in_use(),   predict(3, {true, true, true}).in_use()};
}
PlacementChoice choose(int64_t budget, bool opt_auto, bool par_auto, int stage = 3) {
  PlacementRequest req;
  if (!opt_auto) req.optimizer = Residence::memory;
  if (!par_auto) req.param = Residence::memory;
  req.stage = stage;
  req.host_cap = budget;
  return place(req, [&](const Placement& p) { return predict(stage, option_of(p)); });
}
}  // namespace

TEST(BudgetChoice, TheLeastOffloadThatFits) {
  const Ladder l = ladder();
  ASSERT_GT(l.none, l.none_low);
  ASSERT_GT(l.none_low, l.opt_low);
  ASSERT_GT(l.opt_low, l.both_low);
  ASSERT_GT(l.both, l.opt_low);  // so a budget between them takes lowered limits before parameter files

  const PlacementChoice fits = choose(l.none, true, true);  // fits without offload
  EXPECT_TRUE(fits.placement == Placement{});
  ASSERT_EQ(fits.lines.size(), 2u);
  EXPECT_NE(fits.lines[0].find("offload_optimizer auto -> none: predicted peak"), std::string::npos) << fits.lines[0];

  const PlacementChoice low = choose(l.none_low, true, true);  // lowered limits before any offload
  EXPECT_TRUE(low.placement.lowered_limits);
  EXPECT_EQ(low.placement.optimizer, Residence::memory);

  const PlacementChoice opt = choose(std::max(l.opt, l.opt_low), true, true);  // needs the optimizer on disk
  EXPECT_EQ(opt.placement.optimizer, Residence::file);
  EXPECT_EQ(opt.placement.param, Residence::memory);
  EXPECT_NE(opt.lines[0].find("offload_optimizer auto -> nvme"), std::string::npos) << opt.lines[0];
  EXPECT_NE(opt.lines[0].find("would need " +
                              zt::format_bytes(size_t(predict(3, {false, false, opt.placement.lowered_limits}).in_use()))),
            std::string::npos)
      << opt.lines[0];

  const PlacementChoice both = choose(l.both_low, true, true);  // needs the parameters on disk too
  EXPECT_TRUE((both.placement == Placement{Residence::file, Residence::file, true}));
  EXPECT_EQ(both.peak.in_use(), l.both_low);
  ASSERT_EQ(both.lines.size(), 3u);
  EXPECT_NE(both.lines[1].find("offload_param auto -> nvme"), std::string::npos) << both.lines[1];
  EXPECT_NE(both.lines[2].find("one gradient bucket in flight"), std::string::npos) << both.lines[2];
}

TEST(BudgetChoice, OnlyAutoDevicesMoveAndParametersOnlyAtStage3) {
  const Ladder l = ladder();
  // The optimizer is not "auto": parameters alone may move, after the in-memory options.
  const PlacementChoice par = choose(predict(3, {false, true, true}).in_use(), false, true);
  EXPECT_EQ(par.placement.optimizer, Residence::memory);
  EXPECT_EQ(par.placement.param, Residence::file);
  // Stage 2: no parameter files, whatever offload_param says.
  const int64_t s2 = predict(2, {true, false, true}).in_use();
  const PlacementChoice two = choose(s2, true, true, 2);
  EXPECT_EQ(two.placement.optimizer, Residence::file);
  EXPECT_EQ(two.placement.param, Residence::memory);
  // Nothing "auto": only the configured placement with or without lowered limits.
  EXPECT_EQ(zt::testing_util::error_kind_of([&] { choose(l.opt, false, false); }), zt::ErrorKind::config);
}

TEST(BudgetChoice, ABudgetNothingMeetsSaysWhatWouldFit) {
  const Ladder l = ladder();
  const std::string e = zt::testing_util::error_of([&] { choose(l.both_low - 1, true, true); });
  EXPECT_NE(e.find("[budget] run.memory_budget_mb"), std::string::npos) << e;
  EXPECT_NE(e.find("the smallest predicted peak is " + zt::format_bytes(size_t(l.both_low))), std::string::npos) << e;
  EXPECT_NE(e.find("offload_optimizer nvme, offload_param nvme, one gradient bucket in flight"), std::string::npos)
      << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  // Without "auto" the same error names the offload that would fit.
  const std::string fixed = zt::testing_util::error_of([&] { choose(l.opt_low, false, false); });
  EXPECT_NE(fixed.find("offload_optimizer nvme, offload_param nvme"), std::string::npos) << fixed;
}

// Note [device plan]: beside a device zero::place takes the first placement, least leaving the
// device first, whose predicted device peak fits run.device_memory_mb and whose host states and
// data fit run.memory_budget_mb. Peaks here are made up per placement: {device bytes, host bytes}.
namespace {
PeakEstimate made_up(const Placement& p) {
  const auto [device, host] = [&]() -> std::pair<int64_t, int64_t> {
    using R = Residence;
    if (p.optimizer == R::memory) return {100, 0};
    if (p.param == R::memory) return {60, p.optimizer == R::host ? 40 : 5};
    if (p.optimizer == R::host) return {30, p.param == R::host ? 70 : 45};
    return {30, p.param == R::host ? 35 : 8};
  }();
  PeakEstimate e;
  e.activations = device * kMiB;
  e.states.optim = e.states.host = host * kMiB;  // states in host memory are not on the device
  return e;
}
PlacementChoice on_device(int64_t device_mib, int64_t host_mib, std::optional<Residence> opt = std::nullopt,
                          std::optional<Residence> par = std::nullopt) {
  PlacementRequest req;
  req.optimizer = opt;
  req.param = par;
  req.stage = 3;
  req.device = "sim:0";
  req.device_cap = device_mib * kMiB;
  req.host_cap = host_mib * kMiB;
  return place(req, made_up);
}
}  // namespace

TEST(DevicePlacement, TheLeastLeavingTheDeviceThatFitsBothCaps) {
  using R = Residence;
  EXPECT_TRUE(on_device(100, 0).placement == Placement{});  // fits: nothing leaves
  EXPECT_TRUE((on_device(70, 0).placement == Placement{R::host, R::memory}));  // pinned before files
  EXPECT_TRUE((on_device(70, 10).placement == Placement{R::file, R::memory}));  // the host's cap: files
  EXPECT_TRUE((on_device(40, 80).placement == Placement{R::host, R::host}));   // the parameters leave too
  EXPECT_TRUE((on_device(40, 40).placement == Placement{R::file, R::host}));
  const PlacementChoice c = on_device(40, 10);
  EXPECT_TRUE((c.placement == Placement{R::file, R::file}));
  ASSERT_EQ(c.lines.size(), 1u);
  EXPECT_EQ(c.lines[0], "memory plan on sim:0: offload_optimizer nvme, offload_param nvme: predicted device peak "
                        "30.00MiB fits run.device_memory_mb 40.00MiB, host states and data 8.00MiB fit "
                        "run.memory_budget_mb 10.00MiB");
  EXPECT_EQ(c.peak.in_use(), 30 * kMiB);
  // A configured offload device stays; "auto" beside it moves.
  EXPECT_TRUE((on_device(40, 0, R::file).placement == Placement{R::file, R::host}));
  EXPECT_TRUE((on_device(40, 0, std::nullopt, R::file).placement == Placement{R::host, R::file}));
  // Both configured and fitting: nothing said.
  const PlacementChoice fixed = on_device(100, 0, R::memory, R::memory);
  EXPECT_TRUE(fixed.placement == Placement{});
  EXPECT_TRUE(fixed.lines.empty());
}

// Probe 4, case 13: a placement the config names is held to the cap too, with its limits, then
// lowered ones (said, with the device peak the configured limits would need), then one error.
TEST(DevicePlacement, AConfiguredPlacementIsHeldToTheCapWithLoweredLimitsBeforeAnError) {
  using R = Residence;
  auto lowered_fits = [](const Placement& p) {
    PeakEstimate e = made_up(p);
    if (p.lowered_limits) e.activations = 50 * kMiB;  // the window bounded
    return e;
  };
  PlacementRequest req;
  req.optimizer = req.param = R::memory;
  req.stage = 3;
  req.device = "sim:0";
  req.device_cap = 60 * kMiB;
  req.lowered_bucket = 1000;
  const PlacementChoice c = place(req, lowered_fits);
  EXPECT_TRUE((c.placement == Placement{R::memory, R::memory, true, 1000}));
  ASSERT_EQ(c.lines.size(), 1u);
  EXPECT_NE(c.lines[0].find("offload_optimizer none, offload_param none, one gradient bucket in flight and no stage-3 "
                            "prefetch or reuse, reduce_bucket_size 1000: predicted device peak 50.00MiB fits "
                            "run.device_memory_mb 60.00MiB"),
            std::string::npos)
      << c.lines[0];
  EXPECT_NE(c.lines[0].find("with the configured limits the device would need 100.00MiB"), std::string::npos);
  req.device_cap = 40 * kMiB;
  const std::string e = zt::testing_util::error_of([&] { place(req, lowered_fits); });
  EXPECT_NE(e.find("[memory] run.device_memory_mb=40 (sim:0) fits no plan: the smallest predicted device peak is "
                   "50.00MiB per rank (offload_optimizer none, offload_param none, one gradient bucket"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("let zero_optimization's offload devices be auto"), std::string::npos) << e;
}

TEST(DevicePlacement, CapsThatNoPlacementMeetsAreOneConfigErrorBeforeStep1) {
  const std::string device = zt::testing_util::error_of([] { on_device(20, 0); });
  EXPECT_NE(device.find("[memory] run.device_memory_mb=20 (sim:0) fits no plan: the smallest predicted device "
                        "peak is 30.00MiB per rank (offload_optimizer cpu, offload_param cpu)"),
            std::string::npos)
      << device;
  const std::string host = zt::testing_util::error_of([] { on_device(40, 7); });
  EXPECT_NE(host.find("[memory] run.memory_budget_mb=7 holds no plan that fits the device: the least the host "
                      "needs is 8.00MiB per rank (offload_optimizer nvme, offload_param nvme)"),
            std::string::npos)
      << host;
  EXPECT_EQ(zt::testing_util::error_kind_of([] { on_device(20, 0); }), zt::ErrorKind::config);
}

TEST(DevicePlacement, OffloadDevicesNameResidences) {
  using R = Residence;
  EXPECT_EQ(residence_of("auto", true), std::nullopt);
  EXPECT_EQ(residence_of("cpu", true), R::host);
  EXPECT_EQ(residence_of("cpu", false), R::memory);  // a CPU run's states are host memory already
  EXPECT_EQ(residence_of("nvme", false), R::file);
  EXPECT_EQ(residence_of("none", true), R::memory);
  for (R r : {R::memory, R::host, R::file}) EXPECT_EQ(residence_of(offload_device(r), true), r);
  // Below stage 3 every rank holds all parameters: "auto" means memory; a device's configured
  // offload_param stays as written (the engine's config error names it).
  PlacementRequest req;
  req.stage = 2;
  req.device = "sim:0";
  EXPECT_EQ(place(req, made_up).placement.param, R::memory);
  req.param = R::host;
  EXPECT_EQ(place(req, made_up).placement.param, R::host);
}

// Note [step schedule]: backward's bucket events, one at a time and several in flight.
TEST(StepSchedule, BackwardEventsAreTheReducersLaunchesAndFinishes) {
  const Plan plan = plan_of(2, {});
  const int64_t n = plan.buffers[0].padded, full = 4 * n, flight = 4 * n + 4 * n / 2;
  PeakInput one = limits_of({false, false, true});
  std::vector<StepEvent> ev = backward_events(plan, one);
  ASSERT_EQ(ev.size(), 3 * plan.buffers.size() + 1);
  EXPECT_EQ(ev[0].kind, StepEvent::first_gradient);
  EXPECT_EQ(plan.buffers[ev[0].buffer].params[0].index, 7u);  // the last parameter's buffer first
  EXPECT_EQ(ev[0].held, full);
  EXPECT_EQ(ev[1].kind, StepEvent::launch);
  EXPECT_EQ(ev[1].held, flight);
  // The one in flight finishes before the next bucket's gradient exists (its launch would wait).
  EXPECT_EQ(ev[2].kind, StepEvent::finish);
  EXPECT_EQ(ev[2].buffer, ev[0].buffer);
  EXPECT_EQ(ev[2].held, 0);
  EXPECT_EQ(ev[3].kind, StepEvent::first_gradient);
  EXPECT_EQ(ev[3].held, full);
  EXPECT_EQ(ev[ev.size() - 2].kind, StepEvent::finish);  // end_backward
  EXPECT_EQ(ev[ev.size() - 2].held, 0);
  EXPECT_EQ(ev.back().kind, StepEvent::end);
  // Stages 0-2 cut buckets from the last parameter, stage 3's units are in model order.
  EXPECT_EQ(backward_order(plan), (std::vector<size_t>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(backward_order(plan_of(3, {})), (std::vector<size_t>{7, 6, 5, 4, 3, 2, 1, 0}));
  PeakInput two = one;
  two.max_inflight_elems = 2 * n;
  int64_t peak = 0;
  for (const StepEvent& e : backward_events(plan, two)) peak = std::max(peak, e.held);
  EXPECT_EQ(peak, 2 * flight);  // the third bucket's gradient comes once the first finished
  two.overlap_comm = false;  // each launch finishes at once
  ev = backward_events(plan, two);
  EXPECT_EQ(ev[2].kind, StepEvent::finish);
  EXPECT_EQ(ev[2].held, 0);
}

// Note [tied rows]: the tied embedding's bucket launches first and keeps what its launch held
// (full gradient, wire copy, receive) until the rows are added at the end of backward.
TEST(StepSchedule, TiedRowsLaunchFirstAndHoldUntilTheEnd) {
  PlanInput in = eight_params();
  in.tied_rows.assign(8, false);
  in.tied_rows[0] = true;  // the first parameter, as GPT's wte
  const Plan plan = make_plan(in, make_policy(2, DType::f32, std::nullopt, std::nullopt), 2);
  const int64_t n = int64_t(1) << 20;
  const std::vector<size_t> order = backward_order(plan);
  ASSERT_EQ(order.size(), 8u);
  EXPECT_TRUE(plan.buffers[order[0]].tied_rows);
  EXPECT_EQ(plan.buffers[order[1]].params[0].index, 7u);  // then the last parameter's
  PeakInput one = limits_of({false, false, true});
  const std::vector<StepEvent> ev = backward_events(plan, one);
  const int64_t tied = 4 * n + 4 * n + 2 * n, flight = 4 * n + 2 * n;  // full, wire copy, receive; full, receive
  int64_t peak = 0;
  for (const StepEvent& e : ev) peak = std::max(peak, e.held);
  EXPECT_EQ(peak, tied + flight);  // kept beside the one in flight
  EXPECT_EQ(ev[ev.size() - 2].held, tied);  // still kept once every reduction has finished
  EXPECT_EQ(ev.back().held, 0);
}

// A kind added in one place is summed by every prediction made while it lives, for its span only.
TEST(StepSchedule, AnAddedBufferKindMovesThePrediction) {
  const Plan plan = plan_of(2, {});
  const int64_t n = plan.buffers[0].padded;
  PeakInput one = limits_of({false, false, true}), three = one;
  three.max_inflight_elems = 3 * n;
  const PeakEstimate before = predict_peak(plan, one), before3 = predict_peak(plan, three);
  {
    auto kind = add_buffer_kind(
        {"test scratch", Span::flight, [](const Plan& p, size_t b) { return p.buffers[b].padded * 2; }, true, nullptr,
         zt::MemTag::comm});
    const PeakEstimate with = predict_peak(plan, one);
    EXPECT_EQ(with.grad_buckets - before.grad_buckets, 2 * n);  // one bucket in flight at a time
    EXPECT_EQ(with.in_use() - before.in_use(), 2 * n);
    EXPECT_EQ(predict_peak(plan, three).grad_buckets - before3.grad_buckets, 3 * 2 * n);
  }
  EXPECT_EQ(predict_peak(plan, one).grad_buckets, before.grad_buckets);  // gone with its handle
  // A unit's span: the units gathered at once, each with its bytes (all eight here, then three).
  const Plan plan3 = plan_of(3, {});
  PeakInput in3 = limits_of({});
  const int64_t gathered = predict_peak(plan3, in3).gathered;
  in3.max_live_elems = 2 * n;
  in3.max_reuse_elems = 0;
  const int64_t gathered_capped = predict_peak(plan3, in3).gathered, buckets3 = predict_peak(plan3, in3).grad_buckets;
  {
    auto kind = add_buffer_kind(
        {"unit scratch", Span::unit, [](const Plan& p, size_t b) { return p.buffers[b].padded * 2; }, false, nullptr,
         zt::MemTag::comm});
    EXPECT_EQ(predict_peak(plan3, in3).gathered - gathered_capped, 2 * 2 * n);
    EXPECT_EQ(predict_peak(plan3, limits_of({})).gathered - gathered, 8 * 2 * n);
    EXPECT_EQ(predict_peak(plan3, in3).grad_buckets, buckets3);  // a unit's span is not a bucket's
  }
  {  // and a flight's kind leaves the gathered units alone
    auto kind = add_buffer_kind({"flight scratch", Span::flight, [](const Plan& p, size_t b) { return p.buffers[b].padded; },
                                 true, nullptr, zt::MemTag::comm});
    EXPECT_EQ(predict_peak(plan3, in3).gathered, gathered_capped);
    EXPECT_GT(predict_peak(plan3, in3).grad_buckets, buckets3);
  }
  EXPECT_THROW(add_buffer_kind({"made at the bucket", Span::bucket, [](const Plan&, size_t) { return int64_t(8); }, true,
                                nullptr, zt::MemTag::comm}),
               zt::Error);
}

// Note [prefetch window]: what ParamStore::prefetch gathers ahead of a unit, in either direction.
TEST(StepSchedule, ThePrefetchWindowSkipsKeptUnitsAndStopsAtEitherLimit) {
  Plan plan = plan_of(3, {});
  const int64_t n = plan.buffers[0].padded;
  Stage3Limits lim;
  lim.prefetch_elems = 3 * n;
  auto none = [](size_t) { return false; };
  EXPECT_EQ(prefetch_window(plan, lim, 0, 1, n, none), (std::vector<size_t>{1, 2, 3}));
  EXPECT_EQ(prefetch_window(plan, lim, 5, -1, n, none), (std::vector<size_t>{4, 3, 2}));
  EXPECT_TRUE(prefetch_window(plan, lim, 7, 1, n, none).empty());
  plan.persistent[2] = true;  // kept units neither count nor stop it
  EXPECT_EQ(prefetch_window(plan, lim, 0, 1, n, none), (std::vector<size_t>{1, 3, 4}));
  // Gathered ones count against the prefetch size, not the live limit, and are not gathered again.
  auto one_there = [](size_t u) { return u == 1; };
  lim.max_live_elems = 3 * n;
  EXPECT_EQ(prefetch_window(plan, lim, 0, 1, 2 * n, one_there), (std::vector<size_t>{3}));
  EXPECT_EQ(prefetch_window(plan, lim, 0, 1, n, none), (std::vector<size_t>{1, 3}));
  lim.prefetch_elems = n - 1;  // a unit larger than the prefetch size stops it
  EXPECT_TRUE(prefetch_window(plan, lim, 0, 1, n, none).empty());
}
