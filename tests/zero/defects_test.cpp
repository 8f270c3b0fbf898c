// Edge cases DeepSpeed's own tests try, at every stage and (under mpirun) every world size:
// a module applied twice in one forward, frozen parameters, step() without backward(), and
// fp16 overflow handling agreed by all ranks.
#include "zero_harness.h"

#include "zt/autograd/autograd.h"

using namespace zt;
using namespace zt::testing;
using zt::testing::g_world;

namespace {

// x -> relu(A x) -> relu(A ·) -> B: the square layer A is used twice in one forward.
class TwiceUsed : public nn::Module {
 public:
  TwiceUsed() {
    Generator gen(77);
    TagScope tag(MemTag::param);
    a_ = std::make_shared<nn::Linear>(13, 13, true, gen);
    b_ = std::make_shared<nn::Linear>(13, 5, true, gen);
    register_module("a", a_);
    register_module("b", b_);
  }
  const char* type_name() const override { return "TwiceUsed"; }

 protected:
  Tensor forward(const Tensor& x) override { return (*b_)(ag::relu((*a_)(ag::relu((*a_)(x))))); }

 private:
  std::shared_ptr<nn::Linear> a_, b_;
};

// Reference: one process, stage 0, the whole global batch.
RunResult reference(RunSpec s, const Data& d, const std::function<std::shared_ptr<nn::Module>()>& make) {
  s.stage = 0;
  s.micro *= g_world->size();
  return train(s, comm::make_group("local"), d, make());
}

class Defect : public ::testing::TestWithParam<int> {};

TEST_P(Defect, ModuleUsedTwiceGetsTheSumOfBothUsesGradients) {
  RunSpec s;
  s.stage = GetParam();
  s.steps = 6;
  const Data d = make_data(s.steps * s.micro * s.gas * g_world->size());
  auto make = [] { return std::static_pointer_cast<nn::Module>(std::make_shared<TwiceUsed>()); };
  expect_same_trajectory(train(s, g_world, d, make()), reference(s, d, make), trajectory_tolerance(s.dtype));
}

TEST_P(Defect, FrozenParametersGetNoStateAndNeverChange) {
  RunSpec s;
  s.stage = GetParam();
  s.steps = 6;
  const Data d = make_data(s.steps * s.micro * s.gas * g_world->size());
  auto make = [] {
    auto m = make_model();
    autograd::set_requires_grad(m->named_parameters()[0].second, false);  // 0.weight, 13x19
    return m;
  };
  auto model = make();
  const std::vector<float> frozen_before = model->named_parameters()[0].second.to_vector();
  {
    zero::Engine engine(*model, g_world, options(s));
    EXPECT_EQ(engine.num_params(), 446 - 13 * 19);
    for (int64_t step = 0; step < s.steps; ++step) {
      train_step(engine, s, d, step);
      engine.step(1e-2);
    }
    EXPECT_FALSE(autograd::grad(model->named_parameters()[0].second).defined());
  }
  EXPECT_EQ(model->named_parameters()[0].second.to_vector(), frozen_before);  // weight decay did not move it
  expect_same_trajectory(train(s, g_world, d, make()), reference(s, d, make), trajectory_tolerance(s.dtype));
}

// Note [stale gradient slots]: a parameter no gradient reaches in a step (C, two steps in three)
// is updated with a zero gradient, not with what its slot held from an earlier step: the run
// equals one where a zero gradient reaches it, at the same stage and world size.
TEST_P(Defect, AParameterNoGradientReachesIsUpdatedWithZeros) {
  RunSpec s;
  s.stage = GetParam();
  s.steps = 7;
  const Data d = make_data(s.steps * s.micro * s.gas * g_world->size());
  auto make = [](bool skip) { return std::static_pointer_cast<nn::Module>(std::make_shared<SometimesUsed>(skip)); };
  expect_same_trajectory(train(s, g_world, d, make(true)), train(s, g_world, d, make(false)),
                         trajectory_tolerance(s.dtype));
}

TEST_P(Defect, SecondStepWithoutBackwardIsAnError) {
  RunSpec s;
  s.stage = GetParam();
  s.gas = 1;
  const Data d = make_data(4 * s.micro * g_world->size());
  auto model = make_model();
  zero::Engine engine(*model, g_world, options(s));
  EXPECT_THROW(engine.step(1e-2), Error);  // before any backward
  train_step(engine, s, d, 0);
  engine.step(1e-2);
  std::vector<float> before;
  engine.for_each_full_param([&](const std::string&, const Tensor& p) {
    for (float v : p.to_vector()) before.push_back(v);
  });
  EXPECT_THROW(engine.step(1e-2), Error);
  std::vector<float> after;
  engine.for_each_full_param([&](const std::string&, const Tensor& p) {
    for (float v : p.to_vector()) after.push_back(v);
  });
  EXPECT_EQ(after, before);
  train_step(engine, s, d, 1);  // and training goes on
  EXPECT_NO_THROW(engine.step(1e-2));
}

// fp16: an infinite input on the last rank at step 3 overflows only there; every rank skips
// exactly that step. With hysteresis 2 the first overflow keeps the scale, the second halves it.
TEST_P(Defect, Fp16OverflowOnOneRankSkipsThatStepEverywhere) {
  RunSpec s;
  s.stage = GetParam();
  s.dtype = DType::f16;
  s.gas = 1;
  s.steps = 6;
  const int64_t N = g_world->size();
  Data d = make_data(s.steps * s.micro * N);
  for (int64_t step : {2, 4}) {  // 0-based steps 3 and 5
    const int64_t row = step * s.micro * N + (N - 1) * s.micro;
    d.x.select(0, row).fill_(INFINITY);
  }
  auto model = make_model();
  zero::Engine engine(*model, g_world, options(s));
  std::vector<zero::StepStats> st;
  for (int64_t step = 0; step < s.steps; ++step) {
    train_step(engine, s, d, step);
    st.push_back(engine.step(1e-2));
  }
  const double s0 = std::ldexp(1.0, s.initial_scale_power);
  for (int64_t i = 0; i < s.steps; ++i) EXPECT_EQ(st[size_t(i)].skipped, i == 2 || i == 4) << "step " << i + 1;
  EXPECT_EQ(st[2].loss_scale, s0);
  EXPECT_EQ(st[4].loss_scale, s0);  // hysteresis absorbed the first overflow
  EXPECT_EQ(engine.loss_scale(), s0 / 2);
  EXPECT_EQ(engine.optimizer_steps(), s.steps - 2);
}

TEST_P(Defect, Fp16RunThatKeepsOverflowingEndsWithTheMinimumScaleError) {
  RunSpec s;
  s.stage = GetParam();
  s.dtype = DType::f16;
  s.gas = 1;
  Data d = make_data(20 * s.micro * g_world->size());
  d.x.fill_(INFINITY);
  auto model = make_model();
  zero::EngineOptions o = options(s);
  o.fp16.min_loss_scale = std::ldexp(1.0, s.initial_scale_power - 2);
  zero::Engine engine(*model, g_world, o);
  std::string msg;
  try {
    for (int64_t step = 0; step < 20; ++step) {
      train_step(engine, s, d, step);
      engine.step(1e-2);
    }
  } catch (const Error& e) {
    msg = e.what();
  }
  EXPECT_NE(msg.find("minimum"), std::string::npos) << msg;
}

// A module marked as a stage-3 unit (as a transformer block would be) is gathered, reduced and
// released as one flat buffer with all its parameters, and training is unchanged.
TEST(Stage3Units, AMarkedModuleIsOneUnit) {
  RunSpec s;
  s.stage = 3;
  s.steps = 6;
  const Data d = make_data(s.steps * s.micro * s.gas * g_world->size());
  auto make = [] {
    auto m = std::static_pointer_cast<nn::Module>(std::make_shared<TwiceUsed>());
    m->set_zero_unit(true);
    return m;
  };
  auto model = make();
  EXPECT_EQ(zero::plan_model(*model, options(s), int(g_world->size())).buffers.size(), 1u);
  auto plain = std::static_pointer_cast<nn::Module>(std::make_shared<TwiceUsed>());
  EXPECT_EQ(zero::plan_model(*plain, options(s), int(g_world->size())).buffers.size(), 2u);  // default: a and b
  expect_same_trajectory(train(s, g_world, d, make()), reference(s, d, make), trajectory_tolerance(s.dtype));
}

INSTANTIATE_TEST_SUITE_P(Zero, Defect, ::testing::Values(0, 1, 2, 3),
                         [](const auto& info) { return "stage" + std::to_string(info.param); });

}  // namespace
