// `zerotrain estimate`: per-rank bytes of model states for every stage, from the same layout
// arithmetic the engine uses, before anything runs.
#include <cstdio>

#include "commands.h"
#include "session.h"
#include "zt/zero/layout.h"

namespace zt::apps {

int run_estimate(const config::Config& cfg, int world, double memory_gib) {
  ZT_CHECK(world >= 1, "[estimate] --world must be >= 1, got ", world);
  auto model = build_model(cfg);
  std::vector<int64_t> numels;
  std::vector<std::vector<size_t>> units;
  for (nn::Module* u : model->parameter_owners()) {
    units.emplace_back();
    for (auto& [n, p] : u->own_parameters()) {
      units.back().push_back(numels.size());
      numels.push_back(p.numel());
    }
  }
  int64_t psi = 0;
  for (int64_t n : numels) psi += n;
  const auto opt = optimizer_spec(cfg);
  const int64_t k = optim::state_bytes_per_elem(opt);
  std::printf("model: %lld parameters, optimizer %s (%lld state bytes/param), world size %d, fp32\n",
              (long long)psi, opt.type.c_str(), (long long)k, world);
  std::printf("%-6s %14s %14s %14s %14s\n", "stage", "param", "grad", "optim", "total");
  nlohmann::json out = nlohmann::json::array();
  for (int stage = 0; stage <= 3; ++stage) {
    std::vector<zero::BufferPlan> plan;
    std::vector<bool> persistent;
    if (stage == 3) {
      plan = zero::plan_units(numels, units, world);
      for (auto& b : plan) persistent.push_back(b.numel <= cfg.zero.stage3_param_persistence_threshold);
    } else {
      plan = zero::plan_buckets(numels, cfg.zero.reduce_bucket_size, world);
    }
    zero::MemoryEstimate e = zero::estimate_memory(plan, stage, world, k, persistent);
    std::printf("%-6d %14lld %14lld %14lld %14lld  (%s)\n", stage, (long long)e.param, (long long)e.grad,
                (long long)e.optim, (long long)e.total(), format_bytes(size_t(e.total())).c_str());
    nlohmann::json row = {{"stage", stage}, {"param", e.param}, {"grad", e.grad}, {"optim", e.optim}, {"total", e.total()}};
    if (memory_gib > 0)
      row["max_params"] = zero::max_params_that_fit(int64_t(memory_gib * double(1ull << 30)), stage, world, k);
    out.push_back(row);
  }
  if (memory_gib > 0) {
    std::printf("largest model whose states fit %.2f GiB per rank:", memory_gib);
    for (auto& r : out) std::printf("  stage %d: %lld", int(r["stage"]), (long long)r["max_params"].get<int64_t>());
    std::printf(" parameters\n");
  }
  std::printf("json: %s\n", out.dump().c_str());
  return 0;
}

}  // namespace zt::apps
