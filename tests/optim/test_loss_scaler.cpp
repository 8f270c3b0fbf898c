// LossScaler replays DeepSpeed's DynamicLossScaler.update_scale (Note [loss scaler]); the
// expected sequences are worked out by hand from deepspeed/runtime/fp16/loss_scaler.py.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "zt/core/error.h"
#include "zt/optim/loss_scaler.h"

namespace zt::optim {
namespace {

config::Fp16Config dynamic(int power, int window, int hysteresis, double min_scale = 1) {
  config::Fp16Config c;
  c.initial_scale_power = power;
  c.loss_scale_window = window;
  c.hysteresis = hysteresis;
  c.min_loss_scale = min_scale;
  return c;
}

// Feeds the overflow pattern ('o' overflow, '.' clean) and returns the scale after each step.
std::vector<double> replay(LossScaler& s, const std::string& pattern) {
  std::vector<double> out;
  for (char c : pattern) {
    EXPECT_EQ(s.update(c == 'o'), c == 'o');
    out.push_back(s.scale());
  }
  return out;
}

TEST(LossScaler, DefaultsAreDeepSpeeds) {
  config::Fp16Config c;
  EXPECT_EQ(c.loss_scale, 0);
  EXPECT_EQ(c.loss_scale_window, 1000);
  EXPECT_EQ(c.hysteresis, 2);
  EXPECT_EQ(c.min_loss_scale, 1);
  EXPECT_FALSE(c.consecutive_hysteresis);
  LossScaler s(c);
  EXPECT_TRUE(s.dynamic());
  EXPECT_EQ(s.scale(), 65536.0);  // 2^initial_scale_power, power 16
  EXPECT_EQ(s.state().cur_hysteresis, 2);
}

// stable = cur_iter - last_overflow_iter - 1 with last_overflow_iter = -1 at start, so the
// scale first doubles on update number window + 1, then every window updates.
TEST(LossScaler, DoublesAfterEachWindowOfCleanSteps) {
  LossScaler s(dynamic(4, 3, 2));
  EXPECT_EQ(replay(s, "......."), (std::vector<double>{16, 16, 16, 32, 32, 32, 64}));
  EXPECT_EQ(s.skipped_steps(), 0);
}

TEST(LossScaler, DefaultWindowGrowsOnStep1001) {
  LossScaler s{config::Fp16Config{}};
  for (int i = 0; i < 1000; ++i) s.update(false);
  EXPECT_EQ(s.scale(), 65536.0);
  s.update(false);
  EXPECT_EQ(s.scale(), 131072.0);
}

// With hysteresis 2 the first overflow only spends the hysteresis; the halving does not refill
// it, so later overflows halve at once until a window of clean steps doubles the scale again.
TEST(LossScaler, HalvesAfterHysteresisOverflowsAndRefillsOnGrowth) {
  LossScaler s(dynamic(4, 3, 2));
  EXPECT_EQ(replay(s, "oo"), (std::vector<double>{16, 8}));
  EXPECT_EQ(s.state().cur_hysteresis, 1);
  EXPECT_EQ(replay(s, "o"), (std::vector<double>{4}));
  // Overflow at iter 2; stable reaches 3 at iter 6 (the 4th clean step).
  EXPECT_EQ(replay(s, "...."), (std::vector<double>{4, 4, 4, 8}));
  EXPECT_EQ(s.state().cur_hysteresis, 2);
  EXPECT_EQ(replay(s, "o"), (std::vector<double>{8}));  // hysteresis spent again, no halving
  EXPECT_EQ(s.skipped_steps(), 4);
  EXPECT_EQ(s.state().cur_iter, 8);
  EXPECT_EQ(s.state().last_overflow_iter, 7);
}

TEST(LossScaler, CleanStepsRefillHysteresisOnlyWhenConsecutive) {
  LossScaler plain(dynamic(4, 100, 2));
  EXPECT_EQ(replay(plain, "o.o"), (std::vector<double>{16, 16, 8}));
  config::Fp16Config c = dynamic(4, 100, 2);
  c.consecutive_hysteresis = true;
  LossScaler consecutive(c);
  EXPECT_EQ(replay(consecutive, "o.o.o."), std::vector<double>(6, 16));
  EXPECT_EQ(replay(consecutive, "oo"), (std::vector<double>{16, 8}));
}

TEST(LossScaler, HysteresisOneHalvesOnEveryOverflow) {
  LossScaler s(dynamic(4, 100, 1));
  EXPECT_EQ(replay(s, "o.o"), (std::vector<double>{8, 8, 4}));
}

TEST(LossScaler, StaticScaleNeverChangesButSkipsOverflows) {
  config::Fp16Config c;
  c.loss_scale = 128;
  LossScaler s(c);
  EXPECT_FALSE(s.dynamic());
  EXPECT_EQ(replay(s, "ooo" + std::string(3000, '.')), std::vector<double>(3003, 128));
  EXPECT_EQ(s.skipped_steps(), 3);
}

// The scale stops at min_loss_scale; one more overflow there throws ErrorKind::data.
TEST(LossScaler, OverflowAtTheMinimumScaleIsADataError) {
  LossScaler s(dynamic(3, 100, 1, 3));
  EXPECT_EQ(replay(s, "oo"), (std::vector<double>{4, 3}));
  try {
    s.update(true);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::data);
    const std::string msg = e.what();
    EXPECT_NE(msg.find("[fp16] loss scale already at its minimum 3 and the gradients still overflow at step 3"),
              std::string::npos)
        << msg;
    EXPECT_NE(msg.find("(try bf16)"), std::string::npos) << msg;
  }
  LossScaler t(dynamic(3, 100, 1, 3));
  EXPECT_EQ(replay(t, "o."), (std::vector<double>{4, 4}));  // clean steps at the minimum are fine
}

TEST(LossScaler, StateRoundTripContinuesTheSameSequence) {
  LossScaler a(dynamic(5, 3, 2));
  replay(a, "o..o.");
  LossScaler b(dynamic(5, 3, 2));
  b.load(a.state());
  EXPECT_EQ(b.skipped_steps(), 2);
  EXPECT_EQ(replay(a, "...oo..."), replay(b, "...oo..."));
  EXPECT_EQ(a.state().cur_iter, b.state().cur_iter);
}

TEST(LossScaler, LoadRejectsInconsistentStateAsCheckpointError) {
  LossScaler s{config::Fp16Config{}};
  auto bad = [&](auto edit) {
    LossScaler::State st = s.state();
    edit(st);
    try {
      s.load(st);
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::checkpoint) << e.what();
    }
  };
  bad([](LossScaler::State& st) { st.scale = 0; });
  bad([](LossScaler::State& st) { st.cur_hysteresis = 0; });
  bad([](LossScaler::State& st) { st.last_overflow_iter = 0; });  // at cur_iter 0
  bad([](LossScaler::State& st) { st.skipped_steps = 1; });
  LossScaler::State st;
  st.cur_hysteresis = 5;  // a hysteresis lowered in the config since applies at once
  st.cur_iter = 10;
  s.load(st);
  EXPECT_EQ(s.state().cur_hysteresis, 2);
}

TEST(LossScaler, RejectsBadConfigs) {
  auto bad = [](auto edit, const std::string& part) {
    config::Fp16Config c;
    edit(c);
    try {
      LossScaler s(c);
      ADD_FAILURE() << "no error, expected: " << part;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::config);
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  bad([](config::Fp16Config& c) { c.loss_scale = -1; }, "loss_scale must be >= 0");
  bad([](config::Fp16Config& c) { c.loss_scale_window = 0; }, "loss_scale_window must be >= 1");
  bad([](config::Fp16Config& c) { c.hysteresis = 0; }, "hysteresis must be >= 1");
  bad([](config::Fp16Config& c) { c.min_loss_scale = 0; }, "min_loss_scale must be > 0");
  bad([](config::Fp16Config& c) { c.initial_scale_power = 99; }, "initial_scale_power must be in [0, 62]");
}

}  // namespace
}  // namespace zt::optim
