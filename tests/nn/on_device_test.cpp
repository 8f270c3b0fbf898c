// Models on a device (Module::to): on a GPU the MLP, the CNN (cuDNN convolutions) and GPT (fused
// attention) follow the CPU's losses and AdamW trajectory within f32 tolerance (skipped, with a
// line, where no GPU is present); on the sim device their losses and gradients equal the CPU's bit
// for bit. Moving to a device that is missing is one clear error.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "../common/error_of.h"
#include "zt/autograd/autograd.h"
#include "zt/autograd/functions.h"
#include "zt/core/random.h"
#include "zt/nn/conv.h"
#include "zt/nn/transformer.h"
#include "zt/optim/optimizer.h"

namespace zt {
namespace {

using testing_util::error_of;

TEST(ModuleTo, TheCpuIsANoOpAndATiedParameterStaysOne) {
  nn::TransformerConfig c;
  c.vocab_size = 11, c.block_size = 8, c.n_layer = 1, c.n_head = 2, c.n_embd = 8;
  auto m = nn::make_gpt(c);
  const auto before = m->parameters();
  m->to(Device::cpu());
  const auto after = m->parameters();
  ASSERT_EQ(before.size(), after.size());
  for (size_t i = 0; i < before.size(); ++i) EXPECT_EQ(before[i].storage(), after[i].storage());
}

TEST(ModuleTo, AMissingDeviceIsOneErrorAndNothingMoves) {
  if (is_available(Device::cuda(0))) GTEST_SKIP() << "a GPU is present";
  auto m = nn::make_mlp(4, {8}, 3, "relu", 1);
  const std::string e = error_of([&] { m->to(Device::cuda(0)); });
  EXPECT_NE(e.find("cuda"), std::string::npos) << e;
  for (const Tensor& p : m->parameters()) EXPECT_EQ(p.device(), Device::cpu());
}

// One model's training on one device: inputs and targets are copied up once per step, as the
// engine's staging will; AdamW runs on the parameters' device (optim::update's device path).
struct Trajectory {
  std::vector<float> losses;
  std::vector<std::vector<float>> params;  // after the last step
};

using Batch = std::pair<Tensor, Tensor>;  // input (f32 or i32 ids), i32 targets

Trajectory train(nn::Module& m, Device dev, const std::vector<Batch>& batches) {
  m.to(dev);
  config::OptimizerConfig opt;  // AdamW, lr 1e-3, weight decay 0.01
  std::vector<std::vector<Tensor>> states;
  for (const Tensor& p : m.parameters())
    states.push_back({Tensor::zeros(p.shape(), DType::f32, dev), Tensor::zeros(p.shape(), DType::f32, dev)});
  Trajectory t;
  int64_t step = 0;
  for (const auto& [x, y] : batches) {
    ++step;
    for (const Tensor& p : m.parameters()) autograd::set_grad(p, Tensor());
    Tensor out = m(x.to(dev));
    const int64_t V = out.size(out.dim() - 1);
    Tensor loss = ag::cross_entropy(ag::reshape(out, {out.numel() / V, V}), y.to(dev));
    autograd::backward(loss);
    t.losses.push_back(loss.item());
    const auto params = m.parameters();
    for (size_t i = 0; i < params.size(); ++i)
      optim::update(opt, {params[i], Tensor(), autograd::grad(params[i]), states[i], 1e-3f, step, 1.f, Tensor()});
  }
  for (const Tensor& p : m.parameters()) t.params.push_back(p.to_vector());
  return t;
}

class OnGpuModel : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!is_available(Device::cuda(0))) GTEST_SKIP() << "no GPU here: the model-on-a-GPU checks need one";
  }
  // Trains two copies made by `make` from the same seed, on the CPU and on GPU 0, and compares.
  static void expect_same_training(const std::function<std::shared_ptr<nn::Module>()>& make,
                                   const std::vector<Batch>& batches, float tol) {
    auto on_cpu = make(), on_gpu = make();
    const Trajectory a = train(*on_cpu, Device::cpu(), batches), b = train(*on_gpu, Device::cuda(0), batches);
    for (const Tensor& p : on_gpu->parameters()) EXPECT_EQ(p.device(), Device::cuda(0));
    ASSERT_EQ(a.losses.size(), b.losses.size());
    for (size_t s = 0; s < a.losses.size(); ++s)
      EXPECT_NEAR(b.losses[s], a.losses[s], tol * (1 + std::fabs(a.losses[s]))) << "step " << s + 1;
    ASSERT_EQ(a.params.size(), b.params.size());
    for (size_t i = 0; i < a.params.size(); ++i) {
      double worst = 0;
      for (size_t k = 0; k < a.params[i].size(); ++k)
        worst = std::max(worst, double(std::fabs(a.params[i][k] - b.params[i][k])));
      EXPECT_LT(worst, tol) << "parameter " << i << " after " << batches.size() << " steps";
    }
  }
};

std::vector<float> normal(int64_t n, Generator& g) {
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = g.normal(0.f, 1.f);
  return v;
}
std::vector<int32_t> labels(int64_t n, int64_t classes, Generator& g) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (int32_t& x : v) x = int32_t(g.below(uint64_t(classes)));
  return v;
}

TEST_F(OnGpuModel, AnMlpTrainsAsOnTheCpu) {
  Generator g(3);
  std::vector<Batch> b;
  for (int s = 0; s < 5; ++s)
    b.emplace_back(Tensor::from_vector(normal(32 * 20, g), {32, 20}), Tensor::from_ints(labels(32, 7, g), {32}));
  expect_same_training([] { return nn::make_mlp(20, {64, 64}, 7, "gelu", 5); }, b, 2e-3f);
}

TEST_F(OnGpuModel, ACnnTrainsAsOnTheCpu) {
  Generator g(4);
  std::vector<Batch> b;
  for (int s = 0; s < 3; ++s)
    b.emplace_back(Tensor::from_vector(normal(8 * 1 * 16 * 16, g), {8, 1, 16, 16}),
                   Tensor::from_ints(labels(8, 10, g), {8}));
  expect_same_training([] { return nn::make_cnn(1, 16, {8, 16}, {32}, 10, 6); }, b, 2e-3f);
}

TEST_F(OnGpuModel, AGptTrainsAsOnTheCpu) {
  nn::TransformerConfig c;
  c.vocab_size = 97, c.block_size = 32, c.n_layer = 2, c.n_head = 4, c.n_embd = 64, c.seed = 8;
  Generator g(5);
  std::vector<Batch> b;
  for (int s = 0; s < 5; ++s)
    b.emplace_back(Tensor::from_ints(labels(4 * 32, c.vocab_size, g), {4, 32}),
                   Tensor::from_ints(labels(4 * 32, c.vocab_size, g), {4 * 32}));
  expect_same_training([&] { return nn::make_gpt(c); }, b, 2e-3f);
}

// One forward and backward on `dev`: the loss and every parameter's gradient, read back.
std::pair<float, std::vector<std::vector<float>>> loss_and_grads(nn::Module& m, Device dev, const Batch& b) {
  m.to(dev);
  for (const Tensor& p : m.parameters()) autograd::set_grad(p, Tensor());
  Tensor out = m(b.first.to(dev));
  const int64_t V = out.size(out.dim() - 1);
  Tensor loss = ag::cross_entropy(ag::reshape(out, {out.numel() / V, V}), b.second.to(dev));
  autograd::backward(loss);
  std::vector<std::vector<float>> grads;
  for (const Tensor& p : m.parameters()) {
    EXPECT_EQ(autograd::grad(p).device(), dev);
    grads.push_back(autograd::grad(p).to_vector());
  }
  return {loss.item(), grads};
}

// The sim device (Note [sim device]) runs the CPU's kernels on memory the host cannot read: a
// model's loss and gradients there equal the CPU's bit for bit, and no layer reads device memory
// on the host (it would fault).
TEST(OnSimModel, LossAndGradientsEqualTheCpusBitForBit) {
  Generator g(9);
  const Batch mlp{Tensor::from_vector(normal(16 * 20, g), {16, 20}), Tensor::from_ints(labels(16, 7, g), {16})};
  const Batch cnn{Tensor::from_vector(normal(4 * 16 * 16, g), {4, 1, 16, 16}), Tensor::from_ints(labels(4, 10, g), {4})};
  nn::TransformerConfig c;
  c.vocab_size = 97, c.block_size = 32, c.n_layer = 2, c.n_head = 4, c.n_embd = 64, c.seed = 8;
  const Batch gpt{Tensor::from_ints(labels(2 * 32, 97, g), {2, 32}), Tensor::from_ints(labels(2 * 32, 97, g), {64})};
  const std::vector<std::pair<std::function<std::shared_ptr<nn::Module>()>, Batch>> cases{
      {[] { return nn::make_mlp(20, {64, 64}, 7, "gelu", 5); }, mlp},
      {[] { return nn::make_cnn(1, 16, {8, 16}, {32}, 10, 6); }, cnn},
      {[&] { return nn::make_gpt(c); }, gpt}};
  for (const auto& [make, batch] : cases) {
    auto on_cpu = make(), on_sim = make();
    const auto want = loss_and_grads(*on_cpu, Device::cpu(), batch), got = loss_and_grads(*on_sim, Device::sim(), batch);
    EXPECT_EQ(got.first, want.first) << on_cpu->type_name();
    EXPECT_EQ(got.second, want.second) << on_cpu->type_name();
  }
}

// Three AdamW steps (optim::update through the sim table's CPU kernels) follow the CPU bit for bit.
TEST(OnSimModel, AdamWTrainingFollowsTheCpuBitForBit) {
  Generator g(10);
  std::vector<Batch> b;
  for (int s = 0; s < 3; ++s)
    b.emplace_back(Tensor::from_ints(labels(2 * 16, 50, g), {2, 16}), Tensor::from_ints(labels(2 * 16, 50, g), {32}));
  nn::TransformerConfig c;
  c.vocab_size = 50, c.block_size = 16, c.n_layer = 2, c.n_head = 2, c.n_embd = 32, c.seed = 3;
  auto on_cpu = nn::make_gpt(c), on_sim = nn::make_gpt(c);
  const Trajectory want = train(*on_cpu, Device::cpu(), b), got = train(*on_sim, Device::sim(), b);
  EXPECT_EQ(got.losses, want.losses);
  EXPECT_EQ(got.params, want.params);
}

}  // namespace
}  // namespace zt
