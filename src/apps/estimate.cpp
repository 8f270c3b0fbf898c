// `zerotrain estimate`: per-rank bytes of model states for every stage, in memory and with the
// optimizer offloaded to nvme, from the same layout arithmetic the engine uses, before anything
// runs. A table, or with --json one JSON object.
#include <cstdio>

#include "commands.h"
#include "session.h"
#include "zt/zero/engine.h"

namespace zt::apps {

namespace {

// Everything estimate knows, as the JSON that --json prints; the table is drawn from it. The
// numbers come from zero::plan_model, the plan the engine itself makes.
nlohmann::json estimate_json(const config::Config& cfg, const EstimateOptions& opt) {
  auto model = build_model(cfg, /*deferred=*/true);
  const auto spec = optimizer_spec(cfg);
  const int world = opt.world;
  zero::EngineOptions eo = engine_options(cfg, config::BatchSizes{1, 1, 1});
  nlohmann::json out = {{"parameters", model->num_parameters()},
                        {"optimizer", spec.type},
                        {"optimizer_state_bytes_per_param", optim::state_bytes_per_elem(spec)},
                        {"world_size", world},
                        {"dtype", eo.dtype == DType::f32    ? "fp32"
                                  : eo.dtype == DType::bf16 ? "bf16"
                                                            : "fp16"},
                        {"stages", nlohmann::json::array()}};
  if (opt.memory_gib > 0) out["memory_gib"] = opt.memory_gib;
  const zero::Residence param_residence = eo.param_residence;
  for (int stage = 0; stage <= 3; ++stage) {
    eo.stage = stage;
    eo.param_residence = stage == 3 ? param_residence : zero::Residence::memory;  // offload_param: stage 3 only
    const zero::Plan plan = zero::plan_model(*model, eo, world);
    const zero::MemoryEstimate e = plan.memory();
    nlohmann::json row = {{"stage", stage},     {"param", e.param}, {"grad", e.grad},
                          {"master", e.master}, {"optim", e.optim}, {"total", e.total()}};
    if (opt.memory_gib > 0)
      row["max_params"] = zero::max_params_that_fit(int64_t(opt.memory_gib * double(1ull << 30)), plan.policy, world,
                                                    plan.optim_state_bytes_per_elem);
    // The same stage with offload_optimizer.device = nvme (Note [optimizer swap]): the master and
    // states move to disk, and memory keeps the tile buffers.
    zero::EngineOptions off = eo;
    off.optimizer_residence = zero::Residence::file;
    const zero::MemoryEstimate f = zero::plan_model(*model, off, world).memory();
    row["offload_optimizer_nvme"] = {{"param", f.param}, {"grad", f.grad},   {"master", f.master},
                                     {"optim", f.optim}, {"total", f.total()}, {"disk", e.master + e.optim}};
    out["stages"].push_back(row);
  }
  return out;
}

void print_table(const nlohmann::json& j) {
  std::printf("model: %lld parameters, optimizer %s (%lld state bytes/param), world size %d, %s\n",
              (long long)j["parameters"].get<int64_t>(), j["optimizer"].get<std::string>().c_str(),
              (long long)j["optimizer_state_bytes_per_param"].get<int64_t>(), j["world_size"].get<int>(),
              j["dtype"].get<std::string>().c_str());
  std::printf("%-6s %14s %14s %14s %14s %14s\n", "stage", "param", "grad", "master", "optim", "total");
  for (const auto& r : j["stages"]) {
    const int64_t total = r["total"];
    std::printf("%-6d %14lld %14lld %14lld %14lld %14lld  (%s)\n", r["stage"].get<int>(),
                (long long)r["param"].get<int64_t>(), (long long)r["grad"].get<int64_t>(),
                (long long)r["master"].get<int64_t>(), (long long)r["optim"].get<int64_t>(), (long long)total,
                format_bytes(size_t(total)).c_str());
    const nlohmann::json& f = r["offload_optimizer_nvme"];
    std::printf("  nvme %14lld %14lld %14lld %14lld %14lld  (%s; %s on disk)\n", (long long)f["param"].get<int64_t>(),
                (long long)f["grad"].get<int64_t>(), (long long)f["master"].get<int64_t>(),
                (long long)f["optim"].get<int64_t>(), (long long)f["total"].get<int64_t>(),
                format_bytes(size_t(f["total"].get<int64_t>())).c_str(),
                format_bytes(size_t(f["disk"].get<int64_t>())).c_str());
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
  const nlohmann::json j = estimate_json(cfg, opt);
  if (opt.json)
    std::printf("%s\n", j.dump(2).c_str());
  else
    print_table(j);
  return 0;
}

}  // namespace zt::apps
