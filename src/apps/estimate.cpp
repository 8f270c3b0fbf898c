// `zerotrain estimate`: per-rank bytes of model states for every stage, in memory and with the
// optimizer offloaded to nvme, from the same layout arithmetic the engine uses, and the predicted
// peak with activations (Note [peak memory]), before anything runs. A table, or with --json one
// JSON object.
#include <cstdio>

#include "commands.h"
#include "dry_run.h"
#include "memory_plan.h"
#include "session.h"
#include "tasks.h"
#include "train_common.h"
#include "zt/comm/group.h"
#include "zt/core/allocator.h"
#include "zt/ops/ops.h"
#include "zt/zero/engine.h"
#include "zt/zero/param_server.h"
#include "zt/zero/products.h"

namespace zt::apps {

namespace {

// Everything estimate knows, as the JSON that --json prints; the table is drawn from it. The
// numbers come from zero::plan_model, the plan the engine itself makes.
nlohmann::json estimate_json(const config::Config& cfg, const EstimateOptions& opt, bool device_not_here) {
  auto model = build_model(cfg, /*deferred=*/true);
  const int world = opt.world;
  const config::BatchSizes bs = check_run_settings(cfg, world);
  zero::EngineOptions eo = engine_options(cfg, bs);
  // What `train` refuses before step 1 is refused here with the same line (probe 4, case 5).
  if (cfg.run.strategy == "parameter_server")
    zero::check_param_server_options(eo);
  else
    zero::check_engine_options(eo);
  check_checkpoint_async(cfg);
  // Note [peak memory]: the peak of each row at the configured micro-batch, activations included
  // (data and the process baseline are a run's own: `train` measures them before step 1).
  RunContext ctx{world, 0, world > 1 && (cfg.run.comm_backend == "auto" || cfg.run.comm_backend == "shm"),
                 eval_batch_of(cfg, bs.micro)};
  ctx.staged = world > 1 && !eo.device.is_cpu();  // the host backends' collectives (Note [staged group])
  // A GPU not here holds what run.device_memory_mb says (Note [device cap]), or is not capped.
  if (device_not_here) ctx.device_capacity = cfg.run.device_memory_mb > 0 ? size_t(cfg.run.device_memory_mb) << 20 : 0;
  // 16-bit runs: the product path `train` would take on this processor (Note [16-bit products]).
  std::optional<zero::ProductsChoice> products;
  if (eo.dtype != DType::f32) {
    products = zero::choose_products(*comm::make_group("local"), eo.dtype, cfg.run.bf16_products,
                                     product_shape(cfg, *model, bs.micro));
    ctx.f32_compute = eo.f32_compute = products->f32_compute(eo.device);
  }
  auto peak_of = [&](const zero::EngineOptions& o) { return peak_json(predict_run_peak(*model, cfg, o, bs, ctx)); };
  nlohmann::json out = {{"parameters", model->num_parameters()},
                        {"optimizer", cfg.optimizer.type},
                        {"optimizer_state_bytes_per_param", optim::state_bytes_per_elem(cfg.optimizer)},
                        {"world_size", world},
                        {"dtype", eo.dtype == DType::f32    ? "fp32"
                                  : eo.dtype == DType::bf16 ? "bf16"
                                                            : "fp16"},
                        {"stages", nlohmann::json::array()}};
  if (opt.memory_gib > 0) out["memory_gib"] = opt.memory_gib;
  out["device"] = eo.device.str();  // where the rows' bytes live (a device's, or the host's for cpu)
  if (products)
    out["products"] = {{"path", ops::products_name(products->products)},
                       {"f32_compute", ctx.f32_compute},
                       {"line", products->line(eo.dtype, ctx.f32_compute)}};
  config::Config ckpt = cfg, plain = cfg;
  ckpt.activation_checkpointing.enabled = true;
  plain.activation_checkpointing.enabled = false;
  out["micro_batch"] = bs.micro;
  const DryRunShape shape{bs.micro, bs.accumulation, ctx.eval_batch, ctx.f32_compute, cfg.zero.stage};
  out["activations"] = {{"configured", measure_activations(cfg, shape).peak},
                        {"checkpointing", measure_activations(ckpt, shape).peak},
                        {"no_checkpointing", measure_activations(plain, shape).peak}};
  // Every stage in memory, then offloaded (the configuration's own placement is one of the rows).
  eo.placement = zero::Placement{};
  for (int stage = 0; stage <= 3; ++stage) {
    eo.zero.stage = stage;
    const zero::Plan plan = zero::plan_model(*model, eo, world);
    const zero::MemoryEstimate e = plan.memory();
    nlohmann::json row = {{"stage", stage},     {"param", e.param}, {"grad", e.grad},
                          {"master", e.master}, {"optim", e.optim}, {"total", e.total()}};
    row["peak"] = peak_of(eo);
    if (opt.memory_gib > 0)
      row["max_params"] = zero::max_params_that_fit(int64_t(opt.memory_gib * double(1ull << 30)), plan.policy, world,
                                                    plan.optim_state_bytes_per_elem);
    // The same stage with offload_optimizer.device = nvme (Note [optimizer swap]): the master and
    // states move to disk, and memory keeps the tile buffers.
    zero::EngineOptions off = eo;
    off.placement->optimizer = zero::Residence::file;
    const zero::MemoryEstimate f = zero::plan_model(*model, off, world).memory();
    row["offload_optimizer_nvme"] = {{"param", f.param}, {"grad", f.grad},     {"master", f.master},
                                     {"optim", f.optim}, {"total", f.total()}, {"disk", e.master + e.optim}};
    row["offload_optimizer_nvme"]["peak"] = peak_of(off);
    if (stage == 3) {  // ZeRO-Infinity: the parameter shards in files too
      off.placement->param = zero::Residence::file;
      row["offload_both_nvme"] = {{"peak", peak_of(off)}};
    }
    if (!eo.device.is_cpu() && stage >= 1) {  // ZeRO-Offload on the device (Note [host residence])
      zero::EngineOptions host = eo;
      host.placement->optimizer = zero::Residence::host;
      const zero::MemoryEstimate h = zero::plan_model(*model, host, world).memory();
      row["offload_optimizer_cpu"] = {{"device", h.on_device()}, {"host", h.host}, {"peak", peak_of(host)}};
      if (stage == 3) {  // and the parameter shards beside them
        host.placement->param = zero::Residence::host;
        const zero::MemoryEstimate b = zero::plan_model(*model, host, world).memory();
        row["offload_both_cpu"] = {{"device", b.on_device()}, {"host", b.host}, {"peak", peak_of(host)}};
      }
    }
    out["stages"].push_back(row);
  }
  // What `train` would choose at the configured stage: under a host budget, or on a device against
  // its cap (Note [device plan]).
  const bool device_plan = cfg.run.device != "cpu";  // every placement is checked against the cap
  if (cfg.run.memory_budget_mb > 0 || device_plan) {
    // With the data `train` loads before its plan (issue 31, probe case 5): read as train reads it,
    // its allocator bytes measured; without it (not installed here) the plan says so.
    RunContext run_ctx = ctx;
    std::string no_data;
    try {
      const int64_t before = int64_t(Allocator::global().stats().total_current);
      const std::unique_ptr<Task> task = make_task(cfg);
      run_ctx.data_bytes = int64_t(Allocator::global().stats().total_current) - before;
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::data) throw;
      no_data = e.what();
    }
    out["budget_plan"] = {{"stage", cfg.zero.stage}, {"data", run_ctx.data_bytes}};
    if (!no_data.empty()) out["budget_plan"]["data_missing"] = no_data;
    try {
      const MemoryPlan mp = plan_memory(cfg, *model, bs, run_ctx);
      out["budget_plan"]["choices"] = mp.lines;
      out["budget_plan"]["placement"] = placement_json(mp.placement);
      out["budget_plan"]["peak"] = peak_json(mp.peak);
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::config) throw;
      out["budget_plan"]["error"] = e.what();
    }
  }
  return out;
}

std::string mib(const nlohmann::json& v) { return format_bytes(v.get<size_t>()); }

// "1.10GiB at once, 1.20GiB resident": both totals of a peak (Note [peak memory]); its terms are
// under --json.
std::string peak_totals(const nlohmann::json& p) {
  std::string s = mib(p["in_use"]) + " at once, " + mib(p["total"]) + " resident";
  if (p["host"].get<int64_t>() > 0) s += ", + " + mib(p["host"]) + " of states on the host";
  return s;
}

// A short line per row, in MiB/GiB; --json has every byte and term.
void print_table(const nlohmann::json& j) {
  std::printf("model: %lld parameters, optimizer %s (%lld state bytes/param), world size %d, %s\n",
              (long long)j["parameters"].get<int64_t>(), j["optimizer"].get<std::string>().c_str(),
              (long long)j["optimizer_state_bytes_per_param"].get<int64_t>(), j["world_size"].get<int>(),
              j["dtype"].get<std::string>().c_str());
  std::printf("model states per rank:\n%-8s %10s %10s %10s %10s %10s\n", "stage", "param", "grad", "master", "optim",
              "total");
  auto row = [](const std::string& label, const nlohmann::json& r, const std::string& more) {
    std::printf("%-8s %10s %10s %10s %10s %10s%s\n", label.c_str(), mib(r["param"]).c_str(), mib(r["grad"]).c_str(),
                mib(r["master"]).c_str(), mib(r["optim"]).c_str(), mib(r["total"]).c_str(), more.c_str());
  };
  for (const auto& r : j["stages"]) {
    row(std::to_string(r["stage"].get<int>()), r, "");
    row("  nvme", r["offload_optimizer_nvme"], "  (" + mib(r["offload_optimizer_nvme"]["disk"]) + " on disk)");
    for (const char* key : {"offload_optimizer_cpu", "offload_both_cpu"})
      if (r.contains(key)) {
        const nlohmann::json& h = r[key];
        std::printf("  cpu    %s on %s, %s in host memory (%s)\n", mib(h["device"]).c_str(),
                    j["device"].get<std::string>().c_str(), mib(h["host"]).c_str(),
                    key == std::string("offload_both_cpu") ? "offload_optimizer and offload_param cpu"
                                                           : "offload_optimizer cpu");
      }
  }
  if (j.contains("products")) std::printf("%s\n", j["products"]["line"].get<std::string>().c_str());
  const nlohmann::json& a = j["activations"];
  const bool on = a["configured"] == a["checkpointing"] && a["checkpointing"] != a["no_checkpointing"];
  std::printf("activations per rank at micro-batch %lld: %s (%s)", (long long)j["micro_batch"].get<int64_t>(),
              mib(a["configured"]).c_str(), on ? "checkpointed" : "as configured");
  if (a["checkpointing"] != a["no_checkpointing"])
    std::printf("; %s %s", on ? "without checkpointing" : "with activation_checkpointing",
                mib(on ? a["no_checkpointing"] : a["checkpointing"]).c_str());
  std::printf("\npredicted peak per rank (data and the process baseline not included):\n");
  for (const auto& r : j["stages"]) {
    const int st = r["stage"].get<int>();
    std::printf("  stage %d, in memory: %s\n", st, peak_totals(r["peak"]).c_str());
    std::printf("  stage %d, offload_optimizer nvme: %s\n", st,
                peak_totals(r["offload_optimizer_nvme"]["peak"]).c_str());
    if (r.contains("offload_optimizer_cpu"))
      std::printf("  stage %d, offload_optimizer cpu: %s\n", st,
                  peak_totals(r["offload_optimizer_cpu"]["peak"]).c_str());
    if (r.contains("offload_both_cpu"))
      std::printf("  stage %d, + offload_param cpu: %s\n", st, peak_totals(r["offload_both_cpu"]["peak"]).c_str());
    if (r.contains("offload_both_nvme"))
      std::printf("  stage %d, + offload_param nvme: %s\n", st, peak_totals(r["offload_both_nvme"]["peak"]).c_str());
  }
  const bool planned =
      j.contains("budget_plan") &&
      (j["budget_plan"].contains("error") || !j["budget_plan"].value("choices", nlohmann::json::array()).empty());
  if (planned) {  // where train prints nothing (a placement as configured that fits), neither does this
    const nlohmann::json& b = j["budget_plan"];
    if (b.contains("data_missing"))
      std::printf("budget plan without the data, which is not here: %s\n",
                  b["data_missing"].get<std::string>().c_str());
    else
      std::printf("budget plan with the data train loads: %s\n", mib(b["data"]).c_str());
    if (b.contains("error")) std::printf("%s\n", b["error"].get<std::string>().c_str());
    for (const auto& line : b.value("choices", nlohmann::json::array()))
      std::printf("%s\n", line.get<std::string>().c_str());
  }
  if (!j.contains("memory_gib")) return;
  std::printf("largest model whose states fit %.2f GiB per rank:", j["memory_gib"].get<double>());
  for (const auto& r : j["stages"])
    std::printf("  stage %d: %lld", r["stage"].get<int>(), (long long)r["max_params"].get<int64_t>());
  std::printf(" parameters\n");
}

}  // namespace

int run_estimate(const config::Config& cfg, const EstimateOptions& opt) {
  ZT_CHECK(opt.world >= 1, "[estimate] world size must be >= 1, got ", opt.world);
  ZT_CHECK(opt.memory_gib >= 0 && opt.memory_gib < kMaxMemoryGib, "[estimate] memory_gib must be in [0, ",
           kMaxMemoryGib, "), got ", opt.memory_gib);
  check_run_settings(cfg, opt.world);
  // A GPU run is planned where no GPU is (or CUDA is not built): placement only asks whether the
  // states live off the host, so the sim device stands in and the rows name the configured device.
  config::Config plan = cfg;
  if (cfg.run.device.rfind("cuda", 0) == 0) {
    try {
      (void)run_device(cfg.run.device);
    } catch (const Error&) {
      plan.run.device = "sim";
    }
  }
  nlohmann::json j = estimate_json(plan, opt, plan.run.device != cfg.run.device);
  if (plan.run.device != cfg.run.device) j["device"] = cfg.run.device + " (planned here without it)";
  if (opt.json)
    std::printf("%s\n", j.dump(2).c_str());
  else
    print_table(j);
  return 0;
}

}  // namespace zt::apps
