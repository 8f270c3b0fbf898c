#pragma once
// Learning-rate schedules with DeepSpeed's names, keys, defaults and formulas
// (deepspeed/runtime/lr_schedules.py): WarmupLR, WarmupDecayLR, WarmupCosineLR, OneCycle,
// LRRangeTest.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace zt::optim {

// Note [schedule step]: lr(step) is the lr of the update that follows `step` completed
// optimizer steps (0 for the first). DeepSpeed's engine steps its scheduler after each
// optimizer step, so that update sees the scheduler with last_batch_iteration = step - 1,
// and step 0 sees the value its constructor set (-1). We reproduce that sequence exactly.
class LRSchedule {
 public:
  virtual ~LRSchedule() = default;
  virtual double lr(int64_t step) const = 0;
  virtual std::string name() const = 0;
};

// type "" → constant base_lr. base_lr is the optimizer's lr (WarmupCosineLR's peak, WarmupLR's
// default warmup_max_lr); total_steps (if > 0) fills a missing total_num_steps.
// Throws zt::Error for an unknown type, an unknown key (naming the nearest known one), or a
// value of the wrong type or range.
std::unique_ptr<LRSchedule> make_schedule(const std::string& type, const nlohmann::json& params, double base_lr,
                                          int64_t total_steps);

// The schedule types make_schedule accepts (besides "").
const std::vector<std::string>& schedule_types();

}  // namespace zt::optim
