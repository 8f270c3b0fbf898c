// GPT-2 and BERT modules: Hugging Face names and sizes (124M's shape from shapes only), one
// parameter for a tied weight, activation checkpointing that changes memory but not gradients,
// and dropout masks that a recompute reproduces.
#include <gtest/gtest.h>

#include <map>

#include "zt/autograd/autograd.h"
#include "zt/autograd/functions.h"
#include "zt/core/allocator.h"
#include "zt/nn/transformer.h"
#include "../common/tiny_gpt.h"

using namespace zt;

namespace {

nn::TransformerConfig tiny(int64_t vocab = 37) { return testing_util::tiny_gpt(vocab, 16, /*seed=*/7); }

Tensor random_ids(int64_t B, int64_t T, int64_t vocab, uint64_t seed) {
  Generator g(seed);
  std::vector<int32_t> v(static_cast<size_t>(B * T));
  for (auto& x : v) x = int32_t(g.below(uint64_t(vocab)));
  return Tensor::from_ints(v, {B, T});
}

// Loss and every parameter's gradient after one backward.
std::pair<float, std::map<std::string, std::vector<float>>> loss_and_grads(nn::Module& m, const std::vector<Tensor>& in,
                                                                           const Tensor& targets) {
  for (auto& [n, p] : m.named_parameters()) autograd::set_grad(p, Tensor());
  Tensor out = m(in);
  const int64_t V = out.size(out.dim() - 1);
  Tensor loss = ag::cross_entropy(ag::reshape(out, {out.numel() / V, V}), targets);
  autograd::backward(loss);
  std::map<std::string, std::vector<float>> g;
  for (auto& [n, p] : m.named_parameters()) g[n] = autograd::grad(p).to_vector();
  return {loss.item(), g};
}

TEST(Gpt, HuggingFaceNamesAndOneTiedParameter) {
  auto m = nn::make_gpt(tiny());
  std::vector<std::string> names;
  for (auto& [n, p] : m->named_parameters()) names.push_back(n);
  const std::vector<std::string> want_prefix = {"wte.weight",
                                                "wpe.weight",
                                                "h.0.ln_1.weight",
                                                "h.0.ln_1.bias",
                                                "h.0.attn.c_attn.weight",
                                                "h.0.attn.c_attn.bias",
                                                "h.0.attn.c_proj.weight",
                                                "h.0.attn.c_proj.bias",
                                                "h.0.ln_2.weight",
                                                "h.0.ln_2.bias",
                                                "h.0.mlp.c_fc.weight",
                                                "h.0.mlp.c_fc.bias",
                                                "h.0.mlp.c_proj.weight",
                                                "h.0.mlp.c_proj.bias"};
  ASSERT_GE(names.size(), want_prefix.size());
  for (size_t i = 0; i < want_prefix.size(); ++i) EXPECT_EQ(names[i], want_prefix[i]);
  EXPECT_EQ(names[names.size() - 2], "ln_f.weight");
  EXPECT_EQ(names.back(), "ln_f.bias");  // lm_head.weight is wte.weight: listed once
}

TEST(Gpt, Gpt2SmallShapeHas124MParametersWithoutMemory) {
  nn::TransformerConfig c;  // GPT-2 124M: 12 layers, 768 wide, 12 heads, 1024 positions
  c.block_size = 1024;
  nn::DeferredInit defer;
  const size_t before = Allocator::global().stats().total_current;
  auto m = nn::make_gpt(c);
  EXPECT_EQ(m->num_parameters(), 124439808);  // Hugging Face's count for "gpt2"
  EXPECT_LT(Allocator::global().stats().total_current - before, size_t(1) << 20);
}

TEST(Gpt, TiedProjectionGetsBothGradients) {
  auto m = nn::make_gpt(tiny());
  Tensor ids = random_ids(2, 8, 37, 1), targets = random_ids(1, 16, 37, 2).reshape({16});
  auto [loss, g] = loss_and_grads(*m, {ids}, targets);
  EXPECT_TRUE(std::isfinite(loss));
  // Rows of wte that no input id touches still get the output projection's gradient.
  const auto& gw = g.at("wte.weight");
  std::vector<bool> used(37, false);
  for (float v : ids.to_vector()) used[size_t(v)] = true;
  int64_t unused_rows_with_grad = 0;
  for (int64_t r = 0; r < 37; ++r) {
    if (used[size_t(r)]) continue;
    double s = 0;
    for (int64_t j = 0; j < 16; ++j) s += std::abs(gw[size_t(r * 16 + j)]);
    unused_rows_with_grad += s > 0;
  }
  EXPECT_GT(unused_rows_with_grad, 0);
}

TEST(Gpt, SequenceLongerThanBlockSizeIsAnError) {
  auto m = nn::make_gpt(tiny());
  try {
    (*m)(std::vector<Tensor>{random_ids(1, 17, 37, 3)});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("exceeds model.block_size 16"), std::string::npos) << e.what();
  }
}

// Activation checkpointing: the same loss and bitwise the same gradients (with dropout on: the
// recompute replays the masks), and less activation memory at the peak.
void check_checkpointing(const std::string& model) {
  auto make = [&](bool ckpt) {
    nn::TransformerConfig c = tiny(model == "gpt" ? 37 : 120);
    c.n_layer = 3;
    c.dropout = 0.1f;
    c.activation_checkpointing = ckpt;
    return model == "gpt" ? nn::make_gpt(c) : nn::make_bert(c, "mlm");
  };
  const int64_t V = model == "gpt" ? 37 : 120;
  Tensor ids = random_ids(4, 16, V, 5), targets = random_ids(1, 64, V, 6).reshape({64});
  std::vector<Tensor> in = {ids};
  if (model == "bert") in.push_back(Tensor::from_ints(std::vector<int32_t>(64, 1), {4, 16}));
  auto run = [&](bool ckpt, size_t* activation_peak) {
    auto m = make(ckpt);
    nn::set_dropout_stream(11);
    Allocator::global().reset_peaks();
    auto r = loss_and_grads(*m, in, targets);
    *activation_peak = Allocator::global().stats().peak_of(MemTag::activation);
    return r;
  };
  size_t peak_plain = 0, peak_ckpt = 0;
  auto plain = run(false, &peak_plain);
  auto ckpt = run(true, &peak_ckpt);
  EXPECT_EQ(plain.first, ckpt.first);
  ASSERT_EQ(plain.second.size(), ckpt.second.size());
  for (auto& [n, g] : plain.second) EXPECT_EQ(g, ckpt.second.at(n)) << n;
  EXPECT_LT(peak_ckpt, peak_plain) << "activation peak " << peak_ckpt << " vs " << peak_plain;
  std::printf("[%s] activation peak: %zu bytes without checkpointing, %zu with\n", model.c_str(), peak_plain,
              peak_ckpt);
}

TEST(Gpt, ActivationCheckpointingKeepsGradientsAndSavesMemory) { check_checkpointing("gpt"); }
TEST(Bert, ActivationCheckpointingKeepsGradientsAndSavesMemory) { check_checkpointing("bert"); }

TEST(Bert, NamesPaddingMaskAndClassifier) {
  nn::TransformerConfig c = tiny(120);
  auto mlm = nn::make_bert(c, "mlm");
  std::vector<std::string> names;
  for (auto& [n, p] : mlm->named_parameters()) names.push_back(n);
  EXPECT_EQ(names.front(), "bert.embeddings.word_embeddings.weight");
  EXPECT_NE(std::find(names.begin(), names.end(), "bert.encoder.layer.1.attention.output.LayerNorm.weight"),
            names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "cls.predictions.bias"), names.end());
  EXPECT_EQ(std::find(names.begin(), names.end(), "cls.predictions.decoder.weight"), names.end());  // tied

  // Padding: what sits in masked positions does not change the other positions' outputs.
  auto cls = nn::make_bert(c, "classify", 3);
  cls->train(false);
  autograd::NoGradGuard no_grad;
  Tensor mask = Tensor::from_ints({1, 1, 1, 1, 1, 0, 0, 0}, {1, 8});
  Tensor a = (*cls)(std::vector<Tensor>{Tensor::from_ints({101, 5, 6, 7, 102, 0, 0, 0}, {1, 8}), mask});
  Tensor b = (*cls)(std::vector<Tensor>{Tensor::from_ints({101, 5, 6, 7, 102, 9, 44, 3}, {1, 8}), mask});
  ASSERT_EQ(a.shape(), (Shape{1, 3}));
  EXPECT_EQ(a.to_vector(), b.to_vector());
}

}  // namespace
