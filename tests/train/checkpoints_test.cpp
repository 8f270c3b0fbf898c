// Note [checkpoint cadence]: saves every K steps and at the last one, keeps the last few, and a
// fresh engine resumes from `latest` with the run's own fields and the same parameters.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "zt/autograd/functions.h"
#include "zt/ckpt/checkpoint.h"
#include "zt/comm/group.h"
#include "zt/core/random.h"
#include "zt/nn/module.h"
#include "zt/train/checkpoints.h"
#include "zt/zero/engine.h"

namespace zt::train {
namespace {

zero::EngineOptions adamw(int stage) {
  zero::EngineOptions o;
  o.zero.stage = stage;
  o.optimizer.type = "AdamW";
  o.optimizer.lr = 1e-2;
  return o;
}

std::vector<float> params_of(zero::Engine& e) {
  std::vector<float> all;
  e.for_each_full_param([&](const std::string&, const Tensor& p) {
    for (float v : p.to_vector()) all.push_back(v);
  });
  return all;
}

void train_step(zero::Engine& e, int64_t step) {
  Generator gen(uint64_t(100 + step));
  std::vector<float> x(4 * 8);
  for (float& v : x) v = gen.normal(0.f, 1.f);
  const Tensor logits = e.forward(Tensor::from_vector(x, {4, 8}));
  e.backward(ag::cross_entropy(logits, Tensor::from_ints({0, 1, 2, 1}, {4})));
  e.step(1e-2);
}

TEST(Checkpoints, EveryKStepsAndTheLastThenAFreshEngineResumes) {
  const std::string dir = ::testing::TempDir() + "/zt_cadence_test";
  std::filesystem::remove_all(dir);
  auto model = nn::make_mlp(8, {16}, 3, "relu", 5);
  zero::Engine engine(*model, comm::make_group("local"), adamw(2));
  std::vector<std::string> committed;
  Checkpoints ck(engine, {dir, 2, 2, false}, [&](const std::string& p) { committed.push_back(p); });
  for (int64_t s = 1; s <= 5; ++s) {
    train_step(engine, s);
    ck.after_step(s, 5, {{"seed", 7}});
  }
  ck.finish();
  ASSERT_EQ(committed.size(), 3u);  // steps 2, 4 and the last, 5
  EXPECT_EQ(ck.last(), committed.back());
  EXPECT_EQ(Checkpoints::tag_of(5), "step_00000005");
  EXPECT_EQ(ckpt::list_checkpoints(dir), (std::vector<std::string>{"step_00000004", "step_00000005"}));  // keep_last 2

  auto again = nn::make_mlp(8, {16}, 3, "relu", 6);  // other initial values: the checkpoint's replace them
  zero::Engine resumed(*again, comm::make_group("local"), adamw(3));
  Checkpoints from(resumed, {dir});
  const nlohmann::json extra = from.resume("latest");
  EXPECT_EQ(extra["step"], 5);
  EXPECT_EQ(extra["seed"], 7);
  EXPECT_EQ(from.resumed_from(), committed.back());
  EXPECT_EQ(params_of(resumed), params_of(engine));
  train_step(engine, 6);  // and both go on alike
  train_step(resumed, 6);
  const std::vector<float> a = params_of(engine), b = params_of(resumed);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-6f) << i;
}

}  // namespace
}  // namespace zt::train
