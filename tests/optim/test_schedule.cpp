// LR schedules: values at chosen steps, derived by hand from DeepSpeed's lr_schedules.py.
// Note [schedule step]: lr(s) is DeepSpeed's lr at last_batch_iteration = s - 1 (s = 0 is the
// value the scheduler's constructor sets).
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "zt/core/error.h"
#include "zt/optim/schedule.h"

namespace zt::optim {
namespace {

using nlohmann::json;
constexpr double kTol = 1e-12;

std::unique_ptr<LRSchedule> make(const std::string& type, const json& p, double base = 0.1, int64_t total = 0) {
  return make_schedule(type, p, base, total);
}

TEST(Schedule, ConstantWhenTypeEmpty) {
  auto s = make("", json(), 0.003);
  EXPECT_EQ(s->lr(0), 0.003);
  EXPECT_EQ(s->lr(12345), 0.003);
  EXPECT_NO_THROW(make("", json::object()));
}

TEST(Schedule, WarmupLRLog) {
  auto s = make("WarmupLR", {{"warmup_min_lr", 0.0}, {"warmup_max_lr", 0.01}, {"warmup_num_steps", 10}});
  EXPECT_EQ(s->name(), "WarmupLR");
  EXPECT_NEAR(s->lr(0), 0.0, kTol);                 // constructor: min_lr
  EXPECT_NEAR(s->lr(1), 0.0, kTol);                 // last=0: log(1)/log(10) = 0
  EXPECT_NEAR(s->lr(2), 0.0030102999566398, kTol);  // last=1: 0.01*log(2)/log(10)
  EXPECT_NEAR(s->lr(5), 0.0069897000433602, kTol);  // last=4: 0.01*log(5)/log(10)
  EXPECT_NEAR(s->lr(10), 0.01, kTol);               // last=9: log(10)/log(10) = 1
  EXPECT_NEAR(s->lr(11), 0.01, kTol);               // last=10 >= warmup: gamma = 1
  EXPECT_NEAR(s->lr(100000), 0.01, kTol);
}

TEST(Schedule, WarmupLRLinearAndMinimumWarmupOfTwo) {
  auto s =
      make("WarmupLR",
           {{"warmup_min_lr", 0.001}, {"warmup_max_lr", 0.011}, {"warmup_num_steps", 10}, {"warmup_type", "linear"}});
  EXPECT_NEAR(s->lr(0), 0.001, kTol);
  EXPECT_NEAR(s->lr(1), 0.001, kTol);   // last=0: 0/10
  EXPECT_NEAR(s->lr(6), 0.006, kTol);   // last=5: 0.001 + 0.01*5/10
  EXPECT_NEAR(s->lr(10), 0.01, kTol);   // last=9: 0.001 + 0.01*9/10
  EXPECT_NEAR(s->lr(11), 0.011, kTol);  // last=10: max
  // warmup_num_steps=1 becomes max(2, 1) = 2: last=1 gives 1/2 of the way.
  auto t = make("WarmupLR", {{"warmup_max_lr", 0.02}, {"warmup_num_steps", 1}, {"warmup_type", "linear"}});
  EXPECT_NEAR(t->lr(2), 0.01, kTol);
  EXPECT_NEAR(t->lr(3), 0.02, kTol);
}

TEST(Schedule, WarmupLRDefaults) {
  // warmup_min_lr 0, warmup_num_steps 1000, log; warmup_max_lr = the optimizer's lr (base).
  auto s = make("WarmupLR", json::object(), 0.05);
  EXPECT_NEAR(s->lr(0), 0.0, kTol);
  EXPECT_NEAR(s->lr(11), 0.05 * std::log(11.0) / std::log(1000.0), kTol);  // last=10
  EXPECT_NEAR(s->lr(1000), 0.05, kTol);                                    // last=999: log(1000)/log(1000)
  EXPECT_NEAR(s->lr(5000), 0.05, kTol);
}

TEST(Schedule, WarmupDecayLR) {
  // gamma after warmup = max(0, (total - last) / max(1, total - warmup)); total 110, warmup 10.
  const json p = {{"warmup_min_lr", 0.0},
                  {"warmup_max_lr", 0.01},
                  {"warmup_num_steps", 10},
                  {"warmup_type", "linear"},
                  {"total_num_steps", 110}};
  auto s = make("WarmupDecayLR", p);
  EXPECT_EQ(s->name(), "WarmupDecayLR");
  EXPECT_NEAR(s->lr(5), 0.004, kTol);    // last=4: 4/10
  EXPECT_NEAR(s->lr(11), 0.01, kTol);    // last=10: (110-10)/100 = 1
  EXPECT_NEAR(s->lr(61), 0.005, kTol);   // last=60: (110-60)/100 = 0.5
  EXPECT_NEAR(s->lr(101), 0.001, kTol);  // last=100: 10/100
  EXPECT_NEAR(s->lr(111), 0.0, kTol);    // last=110: 0
  EXPECT_NEAR(s->lr(500), 0.0, kTol);    // clamped at 0
  // total_num_steps falls back to the run length.
  json q = p;
  q.erase("total_num_steps");
  auto t = make("WarmupDecayLR", q, 0.1, 110);
  for (int64_t step : {0, 5, 11, 61, 111}) EXPECT_EQ(t->lr(step), s->lr(step)) << step;
  // WarmupDecayLR's own default warmup_max_lr is 0.001 (not the optimizer lr).
  auto d = make("WarmupDecayLR", {{"total_num_steps", 2000}}, 0.5);
  EXPECT_NEAR(d->lr(1000), 0.001, kTol);   // last=999, end of warmup
  EXPECT_NEAR(d->lr(1501), 0.0005, kTol);  // last=1500: (2000-1500)/1000
}

TEST(Schedule, WarmupCosineLR) {
  // Peak = optimizer lr 0.1. Warmup ratio = 0.1 + r*(1-0.1); cosine over total - warmup = 16.
  auto s = make("WarmupCosineLR", {{"total_num_steps", 20},
                                   {"warmup_min_ratio", 0.1},
                                   {"warmup_num_steps", 4},
                                   {"cos_min_ratio", 0.01},
                                   {"warmup_type", "linear"}});
  EXPECT_NEAR(s->lr(0), 0.0, kTol);    // DeepSpeed's value before the first scheduler step
  EXPECT_NEAR(s->lr(1), 0.01, kTol);   // last=0: ratio 0.1
  EXPECT_NEAR(s->lr(3), 0.055, kTol);  // last=2: 0.1 + 0.5*0.9 = 0.55
  // last=4: progress (4-4+1)/16; ratio 0.01 + 0.99*(1+cos(pi/16))/2, cos(pi/16)=0.98078528040323
  EXPECT_NEAR(s->lr(5), 0.1 * (0.01 + 0.99 * (1 + 0.98078528040323) / 2), 1e-13);
  EXPECT_NEAR(s->lr(12), 0.0505, kTol);  // last=11: progress 8/16, ratio 0.01 + 0.99*0.5
  EXPECT_NEAR(s->lr(20), 0.001, kTol);   // last=19: progress 1, ratio = cos_min_ratio
  EXPECT_NEAR(s->lr(30), 0.001, kTol);   // progress clamped to 1
  // Log warmup with defaults for the ratios: last=1 -> log(2)/log(4) = 0.5.
  auto t = make("WarmupCosineLR", {{"warmup_num_steps", 4}}, 0.1, 100);
  EXPECT_NEAR(t->lr(2), 0.05, kTol);
  EXPECT_NEAR(t->lr(100), 0.1 * 0.0001, kTol);  // last=99: end, cos_min_ratio default 1e-4
}

TEST(Schedule, OneCycleContinuous) {
  // total_size 10, step_ratio 0.4; lr(s) = min + (max-min)*scale at batch_iteration s.
  auto s = make("OneCycle", {{"cycle_min_lr", 0.01},
                             {"cycle_max_lr", 0.11},
                             {"cycle_first_step_size", 4},
                             {"cycle_second_step_size", 6},
                             {"decay_lr_rate", 0.5},
                             {"decay_step_size", 2},
                             {"cycle_momentum", true},
                             {"cycle_min_mom", 0.85},
                             {"cycle_max_mom", 0.95}});
  EXPECT_NEAR(s->lr(0), 0.01, kTol);    // x=0
  EXPECT_NEAR(s->lr(2), 0.06, kTol);    // x=0.2: scale 0.2/0.4
  EXPECT_NEAR(s->lr(4), 0.11, kTol);    // x=0.4: peak
  EXPECT_NEAR(s->lr(7), 0.06, kTol);    // x=0.7: (0.7-1)/(0.4-1) = 0.5
  EXPECT_NEAR(s->lr(10), 0.01, kTol);   // last=9 < 10, batch 10 starts cycle 2: x=0
  EXPECT_NEAR(s->lr(11), 0.008, kTol);  // decay: d = 1, interval 1/2, 0.01/(1+0.25)
  EXPECT_NEAR(s->lr(14), 0.005, kTol);  // d = 4, interval 2, 0.01/(1+1)
  // No decay when decay_lr_rate is 0 (or decay_step_size is 0): stays at cycle_min_lr.
  auto t = make("OneCycle", {{"cycle_min_lr", 0.01},
                             {"cycle_max_lr", 0.11},
                             {"cycle_first_step_size", 4},
                             {"cycle_second_step_size", 6},
                             {"decay_step_size", 2}});
  EXPECT_NEAR(t->lr(14), 0.01, kTol);
  // cycle_second_step_size defaults to the first: total 8, peak at 4, back to min at 8.
  auto u = make("OneCycle", {{"cycle_min_lr", 0.0}, {"cycle_max_lr", 1.0}, {"cycle_first_step_size", 4}});
  EXPECT_NEAR(u->lr(4), 1.0, kTol);
  EXPECT_NEAR(u->lr(6), 0.5, kTol);
  EXPECT_NEAR(u->lr(8), 0.0, kTol);
}

TEST(Schedule, OneCycleStaircase) {
  // First half 4 steps in 2 stairs, second half 6 steps in 3 stairs: scale = floor(pos)/stairs.
  auto s = make("OneCycle", {{"cycle_min_lr", 0.01},
                             {"cycle_max_lr", 0.11},
                             {"cycle_first_step_size", 4},
                             {"cycle_second_step_size", 6},
                             {"cycle_first_stair_count", 2},
                             {"cycle_second_stair_count", 3}});
  EXPECT_NEAR(s->lr(1), 0.01, kTol);                  // pos 1*2/4 = 0.5 -> 0
  EXPECT_NEAR(s->lr(2), 0.06, kTol);                  // pos 1 -> 1/2
  EXPECT_NEAR(s->lr(3), 0.06, kTol);                  // pos 1.5 -> 1/2
  EXPECT_NEAR(s->lr(4), 0.11, kTol);                  // pos 2 -> 1
  EXPECT_NEAR(s->lr(5), 0.01 + 0.1 * 2 / 3.0, kTol);  // second half: (10-5)*3/6 = 2.5 -> 2/3
  EXPECT_NEAR(s->lr(7), 0.01 + 0.1 / 3.0, kTol);      // (10-7)*3/6 = 1.5 -> 1/3
  EXPECT_NEAR(s->lr(8), 0.01 + 0.1 / 3.0, kTol);      // 1 -> 1/3
  EXPECT_NEAR(s->lr(9), 0.01, kTol);                  // 0.5 -> 0
}

TEST(Schedule, LRRangeTest) {
  // lr = min * (1 + rate * interval), interval = last / step_size (floored if staircase).
  auto s = make("LRRangeTest",
                {{"lr_range_test_min_lr", 0.001}, {"lr_range_test_step_size", 10}, {"lr_range_test_step_rate", 2.0}});
  EXPECT_NEAR(s->lr(0), 0.001, kTol);
  EXPECT_NEAR(s->lr(1), 0.001, kTol);  // last=0
  EXPECT_NEAR(s->lr(6), 0.002, kTol);  // last=5: 1 + 2*0.5
  auto t = make("LRRangeTest", {{"lr_range_test_min_lr", 0.001},
                                {"lr_range_test_step_size", 10},
                                {"lr_range_test_step_rate", 2.0},
                                {"lr_range_test_staircase", true}});
  EXPECT_NEAR(t->lr(6), 0.001, kTol);   // floor(0.5) = 0
  EXPECT_NEAR(t->lr(12), 0.003, kTol);  // last=11: floor(1.1) = 1
}

void expect_error(const std::string& type, const json& p, const std::string& part, int64_t total = 0) {
  try {
    make_schedule(type, p, 0.1, total);
    ADD_FAILURE() << "no error, expected: " << part;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

TEST(Schedule, ValidationErrors) {
  expect_error("WarmupLR", {{"warmup_steps", 10}},
               "[scheduler] unknown key 'warmup_steps' for WarmupLR (did you mean 'warmup_num_steps'?)");
  expect_error("WarmupLR", {{"warmup_max_lrr", 1}}, "did you mean 'warmup_max_lr'?");
  expect_error("WarmupCosineLR", {{"cos_min_lr", 0.1}}, "did you mean 'cos_min_ratio'?", 100);
  expect_error("OneCycle", {{"cycle_min_lr", 0.1}, {"cycle_max_lr", 1}, {"cycle_first_stepsize", 3}},
               "did you mean 'cycle_first_step_size'?");
  expect_error("WarmupLr", json::object(),
               "unknown type 'WarmupLr' (allowed: WarmupLR, WarmupDecayLR, "
               "WarmupCosineLR, OneCycle, LRRangeTest; did you mean 'WarmupLR'?)");
  expect_error("WarmupLR", {{"warmup_type", "cosine"}}, "'warmup_type' must be one of log, linear, got \"cosine\"");
  expect_error("WarmupLR", {{"warmup_num_steps", 0}}, "'warmup_num_steps' must be an integer >= 1, got 0");
  expect_error("WarmupLR", {{"warmup_num_steps", 10.5}}, "'warmup_num_steps' must be an integer >= 1, got 10.5");
  expect_error("WarmupLR", {{"warmup_num_steps", "10"}}, "'warmup_num_steps' must be an integer");
  expect_error("WarmupLR", {{"warmup_max_lr", {0.1, 0.2}}}, "per-group lists are not supported");
  expect_error("WarmupLR", {{"warmup_min_lr", -0.1}}, "'warmup_min_lr' must be in [0, inf], got -0.1");
  expect_error("WarmupCosineLR", {{"cos_min_ratio", 2.0}}, "'cos_min_ratio' must be in [0, 1]", 100);
  expect_error("WarmupDecayLR", json::object(), "WarmupDecayLR requires 'total_num_steps'");
  expect_error("WarmupCosineLR", json::object(), "WarmupCosineLR requires 'total_num_steps'");
  expect_error("OneCycle", {{"cycle_max_lr", 0.1}}, "OneCycle requires 'cycle_min_lr'");
  expect_error("OneCycle", {{"cycle_min_lr", 0.1}, {"cycle_max_lr", 1}, {"cycle_momentum", 1}},
               "'cycle_momentum' must be true or false");
  expect_error("WarmupLR", {{"last_batch_iteration", 5}}, "'last_batch_iteration' must be -1");
  expect_error("WarmupLR", json::array(), "params for WarmupLR must be an object");
  expect_error("", {{"warmup_num_steps", 5}}, "params given without a scheduler type");
  EXPECT_NO_THROW(make_schedule("WarmupLR", {{"last_batch_iteration", -1}}, 0.1, 0));
  EXPECT_NO_THROW(make_schedule("WarmupLR", json(), 0.1, 0));
}

}  // namespace
}  // namespace zt::optim
