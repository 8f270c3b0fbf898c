#pragma once
// fp16 loss scaling with DeepSpeed's semantics, config keys and defaults
// (deepspeed/runtime/fp16/loss_scaler.py, DynamicLossScaler.update_scale; Note [loss scaler]).
#include <cstdint>

#include "zt/config/sections.h"

namespace zt::optim {

// DeepSpeed's "fp16" block (Note [config sections]): loss_scale > 0 is a static scale; 0 starts
// a dynamic one at 2^initial_scale_power. loss_scale_window: clean steps before the scale doubles;
// hysteresis: overflows tolerated before it halves; consecutive_hysteresis: refill the hysteresis
// after every clean step. `enabled` and `auto_cast` are not read here.
// Throws zt::Error (ErrorKind::config) for a value out of range.
void validate(const config::Fp16Config& c);

class LossScaler {
 public:
  explicit LossScaler(const config::Fp16Config& c);  // validates c

  double scale() const { return state_.scale; }
  bool dynamic() const { return dynamic_; }

  // Call once per optimizer step, after the global (all-rank) overflow check. Returns true if
  // the step must be skipped (overflow, in both modes) and adjusts a dynamic scale. Throws
  // zt::Error (ErrorKind::data) on an overflow at min_loss_scale, as DeepSpeed's
  // raise_error_at_min_scale=True does.
  bool update(bool overflow);
  int64_t skipped_steps() const { return state_.skipped_steps; }

  // For checkpoints; load() restores a scale saved by either mode, as DeepSpeed's
  // load_state_dict does, and throws zt::Error (ErrorKind::checkpoint) if it is inconsistent.
  struct State {
    double scale = 1;
    int cur_hysteresis = 1;
    int64_t last_overflow_iter = -1, cur_iter = 0;
    int64_t skipped_steps = 0;
  };
  State state() const { return state_; }
  void load(const State& s);

 private:
  config::Fp16Config cfg_;
  bool dynamic_;
  State state_;
};

}  // namespace zt::optim
