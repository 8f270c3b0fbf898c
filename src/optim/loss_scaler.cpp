#include "zt/optim/loss_scaler.h"

#include <algorithm>
#include <cmath>

#include "zt/core/error.h"

namespace zt::optim {

// Note [loss scaler]: DynamicLossScaler.update_scale, step by step.
//   overflow: if hysteresis == 1 or cur_hysteresis == 1, the scale halves (not below
//     min_loss_scale; already at it => error), else cur_hysteresis drops by one; either way
//     last_overflow_iter = cur_iter. cur_hysteresis is not refilled by the halving.
//   clean: with consecutive_hysteresis, cur_hysteresis refills at once. Then, if
//     stable = cur_iter - last_overflow_iter - 1 is a positive multiple of the window, the
//     scale doubles and (without consecutive_hysteresis) cur_hysteresis refills.
//   cur_iter += 1 always. A static scale (loss_scale > 0) never changes, but an overflowing
//   step is still skipped, as DeepSpeed's FP16_Optimizer does.

void validate(const config::Fp16Config& c) {
  constexpr auto cfg = ErrorKind::config;
  ZT_CHECK_AS(cfg, std::isfinite(c.loss_scale) && c.loss_scale >= 0,
              "[fp16] loss_scale must be >= 0 (0 = dynamic), got ", c.loss_scale);
  ZT_CHECK_AS(cfg, c.initial_scale_power >= 0 && c.initial_scale_power <= 62,
              "[fp16] initial_scale_power must be in [0, 62], got ", c.initial_scale_power);
  ZT_CHECK_AS(cfg, c.loss_scale_window >= 1, "[fp16] loss_scale_window must be >= 1, got ", c.loss_scale_window);
  ZT_CHECK_AS(cfg, c.hysteresis >= 1, "[fp16] hysteresis must be >= 1, got ", c.hysteresis);
  ZT_CHECK_AS(cfg, std::isfinite(c.min_loss_scale) && c.min_loss_scale > 0, "[fp16] min_loss_scale must be > 0, got ",
              c.min_loss_scale);
}

LossScaler::LossScaler(const config::Fp16Config& c) : cfg_(c), dynamic_(c.loss_scale == 0) {
  validate(c);
  state_.scale = dynamic_ ? std::ldexp(1.0, c.initial_scale_power) : c.loss_scale;
  state_.cur_hysteresis = c.hysteresis;
}

bool LossScaler::update(bool overflow) {
  State& s = state_;
  if (!dynamic_) {
  } else if (overflow) {
    if (cfg_.hysteresis == 1 || s.cur_hysteresis == 1) {
      // ErrorKind::data: not a config or API mistake but what the run's numbers did; the user
      // must change the model, the data or the precision, not retry.
      ZT_CHECK_AS(ErrorKind::data, s.scale != cfg_.min_loss_scale, "[fp16] loss scale already at its minimum ",
                  cfg_.min_loss_scale, " and the gradients still overflow at step ", s.cur_iter + 1,
                  ": the model diverged or fp16's range is too small (try bf16)");
      s.scale = std::max(s.scale / 2, cfg_.min_loss_scale);
    } else {
      --s.cur_hysteresis;
    }
    s.last_overflow_iter = s.cur_iter;
  } else {
    if (cfg_.consecutive_hysteresis) s.cur_hysteresis = cfg_.hysteresis;
    const int64_t stable = s.cur_iter - s.last_overflow_iter - 1;
    if (stable > 0 && stable % cfg_.loss_scale_window == 0) {
      if (!cfg_.consecutive_hysteresis) s.cur_hysteresis = cfg_.hysteresis;
      s.scale *= 2;
    }
  }
  ++s.cur_iter;
  if (overflow) ++s.skipped_steps;
  return overflow;
}

void LossScaler::load(const State& s) {
  constexpr auto ck = ErrorKind::checkpoint;
  ZT_CHECK_AS(ck, std::isfinite(s.scale) && s.scale > 0, "[fp16] checkpoint loss scale must be > 0, got ", s.scale);
  ZT_CHECK_AS(ck, s.cur_hysteresis >= 1, "[fp16] checkpoint cur_hysteresis must be >= 1, got ", s.cur_hysteresis);
  ZT_CHECK_AS(ck, s.last_overflow_iter >= -1 && s.last_overflow_iter < s.cur_iter,
              "[fp16] checkpoint iterations inconsistent: cur_iter ", s.cur_iter, ", last_overflow_iter ",
              s.last_overflow_iter);
  ZT_CHECK_AS(ck, s.skipped_steps >= 0 && s.skipped_steps <= s.cur_iter, "[fp16] checkpoint skipped_steps ",
              s.skipped_steps, " not in [0, cur_iter ", s.cur_iter, "]");
  state_ = s;
  // A hysteresis lowered in the config since the checkpoint applies at once.
  state_.cur_hysteresis = std::min(s.cur_hysteresis, cfg_.hysteresis);
}

}  // namespace zt::optim
