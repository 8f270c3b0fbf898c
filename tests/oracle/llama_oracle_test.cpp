// The PyTorch oracle for the Llama family, in llm.c's manner: zerotrain's nn::make_llama, loaded
// with Hugging Face LlamaForCausalLM's weights (q/k/v and gate/up fused into its qkv_proj and
// gate_up_proj rows), must reproduce torch's logits, loss, every gradient and a 10-step AdamW
// trajectory at every ZeRO stage, for grouped-query attention with an untied head (Llama) and for
// multi-query attention with q/k/v biases and a tied head (Qwen2). Alone, one local rank; under
// mpirun -np N each rank takes rows [r*B/N, (r+1)*B/N) of every batch.
// Fixtures: tests/oracle/gen_llama_oracle.py (plain torch 1.13 in float64, stored as float32).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <map>
#include <string>
#include <tuple>

#include "oracle_harness.h"
#include "zt/autograd/autograd.h"
#include "zt/autograd/functions.h"
#include "zt/ckpt/safetensors.h"
#include "zt/comm/group.h"
#include "zt/nn/llama.h"
#include "zt/zero/engine.h"

using namespace zt;

namespace {

using oracle::compare;
using oracle::expect_within;
using oracle::g_world;
using oracle::global_mean;
using oracle::Mismatch;

struct Oracle {
  ckpt::LoadedTensors file;
  nn::LlamaConfig config;
  int64_t batch = 0, seq = 0, steps = 0;
  config::OptimizerConfig optimizer;

  const Tensor& at(const std::string& name) const {
    const Tensor* t = file.find(name);
    ZT_CHECK(t != nullptr, "[oracle] tensor '", name, "' missing from the fixture; rerun gen_llama_oracle.py");
    return *t;
  }
  // zerotrain's parameter `name` (prefix "", "grad." or "final."): Hugging Face's q, k, v (gate,
  // up) rows stacked into one tensor where zerotrain fuses them, else the tensor of that name.
  std::vector<float> values(const std::string& prefix, const std::string& name) const {
    auto fused = [&](const std::string& part, const std::vector<std::string>& parts) {
      const size_t at = name.find(part);
      std::vector<float> v;
      for (const std::string& p : parts) {
        const std::vector<float> x = this->at(prefix + name.substr(0, at) + p + name.substr(at + part.size())).to_vector();
        v.insert(v.end(), x.begin(), x.end());
      }
      return v;
    };
    if (name.find("qkv_proj") != std::string::npos) return fused("qkv_proj", {"q_proj", "k_proj", "v_proj"});
    if (name.find("gate_up_proj") != std::string::npos) return fused("gate_up_proj", {"gate_proj", "up_proj"});
    return at(prefix + name).to_vector();
  }
  double meta(const std::string& key) const {
    auto it = file.metadata.find(key);
    ZT_CHECK(it != file.metadata.end(), "[oracle] metadata '", key, "' missing from the fixture");
    return std::stod(it->second);
  }
};

Oracle load(const std::string& fixture) {
    Oracle o;
    o.file = ckpt::load_safetensors(ZT_SOURCE_DIR "/tests/oracle/" + fixture + ".safetensors");
    o.config.vocab_size = int64_t(o.meta("vocab_size"));
    o.config.block_size = int64_t(o.meta("block_size"));
    o.config.n_layer = int64_t(o.meta("n_layer"));
    o.config.n_head = int64_t(o.meta("n_head"));
    o.config.n_kv_head = int64_t(o.meta("n_kv_head"));
    o.config.n_embd = int64_t(o.meta("n_embd"));
    o.config.intermediate_size = int64_t(o.meta("intermediate_size"));
    o.config.rope_theta = float(o.meta("rope_theta"));
    o.config.rms_norm_eps = float(o.meta("rms_norm_eps"));
    o.config.qkv_bias = o.meta("qkv_bias") != 0;
    o.config.tie_word_embeddings = o.meta("tie_word_embeddings") != 0;
    o.batch = int64_t(o.meta("batch"));
    o.seq = int64_t(o.meta("seq"));
    o.steps = int64_t(o.meta("steps"));
    o.optimizer.type = o.file.metadata.at("optimizer");
    o.optimizer.lr = float(o.meta("lr"));
    o.optimizer.weight_decay = float(o.meta("weight_decay"));
    o.optimizer.beta1 = float(o.meta("beta1"));
    o.optimizer.beta2 = float(o.meta("beta2"));
    o.optimizer.eps = float(o.meta("eps"));
    return o;
}

// The fixture the running test case reads (Note [llama oracle fixtures]).
std::string g_fixture = "llama_oracle";
const Oracle& oracle() {
  static std::map<std::string, Oracle> loaded;
  auto it = loaded.find(g_fixture);
  if (it == loaded.end()) it = loaded.emplace(g_fixture, load(g_fixture)).first;
  return it->second;
}

// The GPT oracle's bound (Note [GPT oracle tolerances] in gpt_oracle_test.cpp); torch's own float32
// run is within 3e-6 of these fixtures, and the bugs gen_llama_oracle.py tries move the logits by
// 0.15 or more. (Rotary positions give the key bias a gradient: no zero-gradient exception here.)
constexpr double kTol = 2e-5;

zero::EngineOptions engine_options(int stage) {
  zero::EngineOptions o;
  o.zero.stage = stage;
  o.gradient_clipping = 0;           // the oracle does not clip
  o.zero.reduce_bucket_size = 1000;  // elements: several buckets, parameters straddling shards
  o.zero.stage3_prefetch_bucket_size = 2000;
  o.zero.stage3_param_persistence_threshold = 0;  // every stage-3 unit is partitioned
  o.optimizer = oracle().optimizer;
  return o;
}

// zerotrain's Llama with the oracle's weights, copied in by name before an engine packs them.
std::shared_ptr<nn::Module> make_model() {
  auto model = nn::make_llama(oracle().config);
  int64_t copied = 0, in_fixture = 0;
  for (auto& [name, p] : model->named_parameters()) {
    const std::vector<float> w = oracle().values("", name);
    ZT_CHECK(int64_t(w.size()) == p.numel(), "[oracle] ", name, " has ", w.size(), " values in the fixture but ",
             p.numel(), " in make_llama");
    p.copy_(Tensor::from_vector(w, p.shape()));
    copied += p.numel();
  }
  for (auto& [name, t] : oracle().file.tensors)  // every weight of the fixture has a home
    if (name.find('.') != std::string::npos && name.find("grad.") != 0 && name.find("final.") != 0)
      in_fixture += t.numel();
  ZT_CHECK(copied == in_fixture, "[oracle] make_llama holds ", copied, " weights, the fixture ", in_fixture);
  return model;
}

// This rank's rows of step k's batch: ids x [rows, T] and targets y flattened to [rows * T].
struct Batch {
  Tensor x, y;
  int64_t begin, end;  // rows of the fixture's x
};
Batch my_batch(int64_t step, int64_t ranks, int64_t rank) {
  const int64_t B = oracle().batch;
  ZT_CHECK(B % ranks == 0, "[oracle] batch ", B, " does not split over ", ranks, " ranks");
  const int64_t b = step * B + rank * (B / ranks), e = b + B / ranks;
  return {oracle().at("x").slice(0, b, e).contiguous(),
          oracle().at("y").slice(0, b, e).contiguous().reshape({(e - b) * oracle().seq}), b, e};
}

Tensor loss_of(const Tensor& logits, const Tensor& y) {
  return ag::cross_entropy(ag::reshape(logits, {y.numel(), oracle().config.vocab_size}), y);
}

// Gradients of every parameter against grad.<name>; the worst relative error is printed once.
void expect_gradients(const nn::Module& model) {
  Mismatch worst;
  std::string worst_name;
  for (auto& [name, p] : model.named_parameters()) {
    Tensor g = autograd::grad(p);
    ASSERT_TRUE(g.defined()) << name << " has no gradient";
    const Mismatch e = compare(g.to_vector(), oracle().values("grad.", name));
    EXPECT_LE(e.rel, kTol) << "grad." << name << ": max abs error " << e.abs << ", relative " << e.rel;
    if (e.rel >= worst.rel) worst = e, worst_name = name;
  }
  if (g_world->rank() == 0)
    std::cout << "[oracle] gradients: worst grad." << worst_name << " max abs " << worst.abs << ", rel " << worst.rel
              << " (bound " << kTol << ")\n";
}


// Note [llama oracle fixtures]: each case runs on both fixtures, Llama (GQA, untied) then Qwen2
// (MQA, q/k/v biases, tied).
const char* const kFixtures[] = {"llama_oracle", "llama_qkv_bias_oracle"};

// The model alone, no engine, no group: the whole first batch through Module::operator().
class LlamaOracleModel : public ::testing::TestWithParam<const char*> {};
TEST_P(LlamaOracleModel, ModelAloneMatchesTorchLogitsLossAndEveryGradient) {
  g_fixture = GetParam();
  auto model = make_model();
  const Batch b = my_batch(0, 1, 0);
  Tensor logits = (*model)(std::vector<Tensor>{b.x});
  const Shape want_shape{oracle().batch, oracle().seq, oracle().config.vocab_size};
  ASSERT_EQ(logits.shape(), want_shape);
  expect_within(compare(logits.to_vector(), oracle().at("logits").to_vector()), kTol, "logits (model alone)");
  Tensor loss = loss_of(logits, b.y);
  expect_within(compare({float(loss.item())}, oracle().at("loss").to_vector()), kTol, "loss (model alone)");
  autograd::backward(loss);
  expect_gradients(*model);
}

INSTANTIATE_TEST_SUITE_P(Oracle, LlamaOracleModel, ::testing::ValuesIn(kFixtures),
                         [](const auto& info) { return std::string(info.param); });

class LlamaOracle : public ::testing::TestWithParam<std::tuple<const char*, int>> {
 protected:
  void SetUp() override { g_fixture = std::get<0>(GetParam()); }
  int stage() const { return std::get<1>(GetParam()); }
};

TEST_P(LlamaOracle, FirstPassMatchesTorchThroughTheEngine) {
  const int stage = this->stage();
  const Oracle& o = oracle();
  auto model = make_model();
  zero::Engine engine(*model, g_world, engine_options(stage));
  const Batch b = my_batch(0, g_world->size(), g_world->rank());
  Tensor logits = engine.forward(std::vector<Tensor>{b.x});
  expect_within(compare(logits.to_vector(), o.at("logits").slice(0, b.begin, b.end).to_vector()), kTol,
                "logits (this rank's rows)");
  Tensor loss = loss_of(logits, b.y);
  expect_within(compare({float(global_mean(loss.item()))}, o.at("loss").to_vector()), kTol, "loss");
  engine.backward(loss);
  // Full averaged gradients sit behind autograd::grad at stage 0; elsewhere each rank holds a
  // shard, checked through the global norm.
  if (stage == 0) expect_gradients(*model);
  const double norm = engine.step(o.optimizer.lr).grad_norm;
  expect_within(compare({float(norm)}, {o.at("step_grad_norm").to_vector()[0]}), kTol, "gradient norm");
}

TEST_P(LlamaOracle, TenAdamWStepsFollowTorchLossesNormsAndWeights) {
  const Oracle& o = oracle();
  auto model = make_model();
  zero::Engine engine(*model, g_world, engine_options(stage()));
  std::vector<float> losses, norms;
  for (int64_t k = 0; k < o.steps; ++k) {
    const Batch b = my_batch(k, g_world->size(), g_world->rank());
    Tensor loss = loss_of(engine.forward(std::vector<Tensor>{b.x}), b.y);
    losses.push_back(float(global_mean(loss.item())));
    engine.backward(loss);
    norms.push_back(float(engine.step(o.optimizer.lr).grad_norm));
  }
  expect_within(compare(losses, o.at("step_loss").to_vector()), kTol, "losses of 10 steps");
  expect_within(compare(norms, o.at("step_grad_norm").to_vector()), kTol, "gradient norms of 10 steps");
  Mismatch worst;
  int64_t seen = 0;
  engine.for_each_full_param([&](const std::string& name, const Tensor& p) {
    const Mismatch e = compare(p.to_vector(), o.values("final.", name));
    EXPECT_LE(e.rel, kTol) << "final." << name << ": max abs error " << e.abs << ", relative " << e.rel;
    if (e.rel >= worst.rel) worst = e;
    ++seen;
  });
  EXPECT_EQ(seen, int64_t(model->named_parameters().size()));
  if (g_world->rank() == 0)
    std::cout << "[oracle] final weights: worst max abs " << worst.abs << ", rel " << worst.rel << " (bound " << kTol
              << ")\n";
}

INSTANTIATE_TEST_SUITE_P(Oracle, LlamaOracle, ::testing::Combine(::testing::ValuesIn(kFixtures), ::testing::Values(0, 1, 2, 3)),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param)) + "_stage" + std::to_string(std::get<1>(info.param));
                         });

// Note [llama bf16 bounds]: the same ten steps in bf16 (weights, activations and gradients round to
// 8 bits, products accumulate in f32) against the float64 fixture, with the MLP oracle's bf16 bounds
// (Note in mlp_oracle_test.cpp) for losses 1.2e-2, norms 6e-2 and weights 1.5e-1, each relative to
// the tensor's largest magnitude. The logits round at every op's output: ours measured 2.85e-2
// (Llama) and 5.16e-2 (Qwen2, logits up to 11.4), exactly what float64 with a bf16 rounding after
// each op gives; torch's own bf16 model is 4.7e-2 and 3.9e-2 (gen_llama_oracle.py prints it). The
// bound, 8e-2, is above both and far below a wrong op (gen_llama_oracle.py's sensitivities: >= 0.15).
class LlamaOracleBf16 : public LlamaOracle {};

TEST_P(LlamaOracleBf16, TenAdamWStepsFollowTorchWithinTheBf16Bounds) {
  const Oracle& o = oracle();
  auto model = make_model();
  zero::EngineOptions opts = engine_options(stage());
  opts.dtype = DType::bf16;
  zero::Engine engine(*model, g_world, opts);
  std::vector<float> losses, norms;
  for (int64_t k = 0; k < o.steps; ++k) {
    const Batch b = my_batch(k, g_world->size(), g_world->rank());
    Tensor logits = engine.forward(std::vector<Tensor>{b.x});
    if (k == 0) {  // relative to the whole batch's largest logit, as torch's bf16 error is measured
      Mismatch e = compare(logits.to_vector(), o.at("logits").slice(0, b.begin, b.end).to_vector());
      const std::vector<float> all = o.at("logits").to_vector();
      e.rel = e.abs / std::abs(double(*std::max_element(all.begin(), all.end(), [](float x, float y) {
                return std::abs(x) < std::abs(y);
              })));
      expect_within(e, 8e-2, "bf16 logits (this rank's rows)");
    }
    Tensor loss = loss_of(logits, b.y);
    losses.push_back(float(global_mean(loss.item())));
    engine.backward(loss);
    norms.push_back(float(engine.step(o.optimizer.lr).grad_norm));
  }
  expect_within(compare(losses, o.at("step_loss").to_vector()), 1.2e-2, "bf16 losses of 10 steps");
  expect_within(compare(norms, o.at("step_grad_norm").to_vector()), 6e-2, "bf16 gradient norms of 10 steps");
  Mismatch worst;
  engine.for_each_full_param([&](const std::string& name, const Tensor& p) {
    const Mismatch e = compare(p.to_vector(), o.values("final.", name));
    EXPECT_LE(e.rel, 1.5e-1) << "bf16 final." << name << ": max abs error " << e.abs << ", relative " << e.rel;
    if (e.rel >= worst.rel) worst = e;
  });
  if (g_world->rank() == 0)
    std::cout << "[oracle] bf16 final weights: worst max abs " << worst.abs << ", rel " << worst.rel << "\n";
}

INSTANTIATE_TEST_SUITE_P(Oracle, LlamaOracleBf16,
                         ::testing::Combine(::testing::ValuesIn(kFixtures), ::testing::Values(0, 1, 2, 3)),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param)) + "_stage" + std::to_string(std::get<1>(info.param));
                         });

// The fixtures exercise what the model must get right: positions past T exist in neither (rotary
// positions have no table), the untied head has its own gradient, the tied one none, and the key
// bias has a gradient (rotated per position, not a constant shift of every score).
TEST(LlamaOracleFixture, CoverTheUntiedAndTiedHeadsAndAKeyBiasWithAGradient) {
  g_fixture = "llama_oracle";
  EXPECT_NE(oracle().file.find("grad.lm_head.weight"), nullptr);
  EXPECT_LT(oracle().config.n_kv_head, oracle().config.n_head);
  g_fixture = "llama_qkv_bias_oracle";
  EXPECT_EQ(oracle().file.find("lm_head.weight"), nullptr);
  EXPECT_EQ(oracle().config.n_kv_head, 1);
  double sum = 0;
  for (float v : oracle().at("grad.model.layers.0.self_attn.k_proj.bias").to_vector()) sum += std::abs(v);
  EXPECT_GT(sum, 1e-4);
}

}  // namespace

int main(int argc, char** argv) { return zt::oracle::run_all_tests(argc, argv); }
