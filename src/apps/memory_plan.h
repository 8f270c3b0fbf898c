#pragma once
// The memory plan of a run before step 1: the predicted peak per rank, term by term
// (zero::predict_peak with activations from the model kind), and with run.memory_budget_mb the
// offload that fits it ("auto" devices resolved, limits lowered when needed). `train` applies
// it; `estimate` prints it.
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "zt/config/config.h"
#include "zt/nn/module.h"
#include "zt/zero/budget.h"
#include "zt/zero/engine.h"
#include "zt/zero/placement.h"

namespace zt::apps {

// The samples of an evaluation forward as the config says (the test split may hold fewer).
int64_t eval_batch_of(const config::Config& c, int64_t micro);

// What the run holds beside the model: the data already loaded (allocator bytes) and whether
// ranks talk through the shm backend (its staging slots count in each rank's RSS).
struct RunContext {
  int world = 1;
  int64_t data_bytes = 0;
  bool shm = false;
  int64_t eval_batch = 0;  // samples per evaluation forward (0: the run does not evaluate)
  int local_size = 1;      // ranks per node (comm::Group::local_size): where qgZ quantizes
  bool f32_compute = false;  // a 16-bit run computes in f32 (EngineOptions::f32_compute)
  bool staged = false;       // collectives of device tensors copy through host memory (comm::stages_through_host)
  std::optional<size_t> device_capacity =
      std::nullopt;  // the device's bytes where it is not here (estimate of a GPU run)
};

struct MemoryPlan {
  config::Config cfg;              // offload devices resolved: "auto" became "none" or "nvme"
  zero::Placement placement;       // Note [placement choice]: where the states live, the limits
  zero::EngineOptions options;     // what the engine takes (limits lowered when the budget needs it)
  zero::PeakEstimate peak;         // of those options
  std::vector<std::string> lines;  // rank 0 prints them: what was chosen and why
  nlohmann::json record;           // plan_before_step1: the start record's memory_plan
};

// The peak of `opts` for `model` (built deferred or not) at the config's micro-batch.
zero::PeakEstimate predict_run_peak(nn::Module& model, const config::Config& c, const zero::EngineOptions& opts,
                                    const config::BatchSizes& bs, const RunContext& ctx);

// Note [placement choice]: the least offload that fits the budgets (zero::place: "auto" resolved,
// without budgets none), or a config error naming what would fit.
MemoryPlan plan_memory(const config::Config& c, nn::Module& model, const config::BatchSizes& bs, const RunContext& ctx);

// `train`'s plan: the compute runtime warmed up, then the process baseline measured (RSS minus
// the allocator's bytes: libraries, threads) with the data already loaded (ctx.data_bytes is
// taken from the allocator), then plan_memory; `record` holds the terms, the baseline and the
// choices, and predicted_rss: the baseline plus the resident total, or under a budget at most
// the budget (plus the shm slots, outside the allocator).
MemoryPlan plan_before_step1(const config::Config& c, nn::Module& model, const config::BatchSizes& bs, RunContext ctx);

// Note [background save]: checkpoint.async=true where the states live in swap files is a config
// error (a snapshot would hold them in memory); `estimate` checks it as `train` does.
void check_checkpoint_async(const config::Config& c);

// {"offload_optimizer": "cpu", "offload_param": "none", "lowered_limits": false}
nlohmann::json placement_json(const zero::Placement& at);
// The terms of a peak as JSON: states by tag, each transient term, and the total (bytes).
nlohmann::json peak_json(const zero::PeakEstimate& p);

// The compute runtime (OpenMP's threads, oneDNN's kernels) starts at the first matrix product;
// run one before measuring the process baseline so that it counts there, not as the model's.
void warm_up_runtime(DType dtype);

// This process's resident set from /proc/self/status: now (VmRSS) and its peak (VmHWM), bytes.
struct Rss {
  int64_t now = 0, peak = 0;
};
Rss read_rss();

}  // namespace zt::apps
