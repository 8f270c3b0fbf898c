// GPT-2 (Radford et al. 2019) with Hugging Face's parameter names: pre-LN blocks, GELU (tanh)
// MLP of 4x width, learned positions, the output projection tied to the token embedding.
#include <cmath>

#include "zt/autograd/functions.h"
#include "zt/autograd/layers.h"
#include "zt/nn/transformer.h"

namespace zt::nn {
namespace {

class GptAttention : public Module {
 public:
  GptAttention(const TransformerConfig& c, Generator& gen, float proj_std) : heads_(c.n_head) {
    c_attn = std::make_shared<Linear>(c.n_embd, 3 * c.n_embd, true, normal_init(gen, 0.02f), constant_init(0.f));
    c_proj = std::make_shared<Linear>(c.n_embd, c.n_embd, true, normal_init(gen, proj_std), constant_init(0.f));
    register_module("c_attn", c_attn);
    register_module("c_proj", c_proj);
  }
  const char* type_name() const override { return "GptAttention"; }
  std::shared_ptr<Linear> c_attn, c_proj;

 protected:
  Tensor forward(const Tensor& x) override {
    return (*c_proj)(ag::attention((*c_attn)(x), heads_, /*causal=*/true, nullptr));
  }

 private:
  int64_t heads_;
};

class GptMlp : public Module {
 public:
  GptMlp(const TransformerConfig& c, Generator& gen, float proj_std) {
    c_fc = std::make_shared<Linear>(c.n_embd, 4 * c.n_embd, true, normal_init(gen, 0.02f), constant_init(0.f));
    c_proj = std::make_shared<Linear>(4 * c.n_embd, c.n_embd, true, normal_init(gen, proj_std), constant_init(0.f));
    register_module("c_fc", c_fc);
    register_module("c_proj", c_proj);
  }
  const char* type_name() const override { return "GptMlp"; }
  std::shared_ptr<Linear> c_fc, c_proj;

 protected:
  // c_fc and GELU as one node (the same forward ops, a fused backward); the block's hooks gather c_fc.
  Tensor forward(const Tensor& x) override { return (*c_proj)(ag::linear_gelu(x, c_fc->weight, &c_fc->bias)); }
};

// One ZeRO-3 unit: x + attn(ln_1(x)), then + mlp(ln_2(x)), dropout on each branch.
class GptBlock : public Module {
 public:
  GptBlock(const TransformerConfig& c, Generator& gen) {
    // GPT-2 scales the residual projections by 1/sqrt(2 * n_layer).
    const float proj_std = 0.02f / std::sqrt(2.f * float(c.n_layer));
    ln_1 = std::make_shared<LayerNorm>(c.n_embd, c.ln_eps);
    attn = std::make_shared<GptAttention>(c, gen, proj_std);
    ln_2 = std::make_shared<LayerNorm>(c.n_embd, c.ln_eps);
    mlp = std::make_shared<GptMlp>(c, gen, proj_std);
    drop = std::make_shared<Dropout>(c.dropout);
    register_module("ln_1", ln_1);
    register_module("attn", attn);
    register_module("ln_2", ln_2);
    register_module("mlp", mlp);
    register_module("drop", drop);
    set_zero_unit(true);
  }
  const char* type_name() const override { return "GptBlock"; }

 protected:
  Tensor forward(const Tensor& x) override {
    const ag::AddNorm h = ln_2->add_norm(x, (*drop)((*attn)((*ln_1)(x))));  // the residual add fused with ln_2
    return ag::add(h.sum, (*drop)((*mlp)(h.y)));
  }

 private:
  std::shared_ptr<LayerNorm> ln_1, ln_2;
  std::shared_ptr<GptAttention> attn;
  std::shared_ptr<GptMlp> mlp;
  std::shared_ptr<Dropout> drop;
};

class Gpt : public Module {
 public:
  explicit Gpt(const TransformerConfig& c) : c_(c) {
    c.validate("gpt");
    Generator gen(c.seed);
    wte = std::make_shared<Embedding>(c.vocab_size, c.n_embd, normal_init(gen, 0.02f));
    wpe = std::make_shared<Embedding>(c.block_size, c.n_embd, normal_init(gen, 0.01f));
    drop = std::make_shared<Dropout>(c.dropout);
    h = std::make_shared<ModuleList>();
    for (int64_t i = 0; i < c.n_layer; ++i) h->add(std::make_shared<GptBlock>(c, gen));
    ln_f = std::make_shared<LayerNorm>(c.n_embd, c.ln_eps);
    lm_head = std::make_shared<Linear>(wte->weight);
    register_module("wte", wte);
    register_module("wpe", wpe);
    register_module("drop", drop);
    register_module("h", h);
    register_module("ln_f", ln_f);
    register_module("lm_head", lm_head);
  }
  const char* type_name() const override { return "GPT"; }

 protected:
  Tensor forward(const Tensor& ids) override { return forward_inputs({ids}); }
  Tensor forward_inputs(const std::vector<Tensor>& in) override {
    ZT_CHECK(!in.empty() && in[0].dtype() == DType::i32 && in[0].dim() == 2,
             "[gpt] input must be token ids [B, T] i32");
    const int64_t T = in[0].size(1);
    ZT_CHECK(T >= 1 && T <= c_.block_size, "[gpt] sequence length ", T, " exceeds model.block_size ", c_.block_size);
    if (!positions_.defined() || positions_.numel() != T || positions_.device() != in[0].device())
      positions_ = position_ids(T, in[0].device());
    // In registration order (an argument list's is unspecified): backward then gives wte its
    // gradient last, as gradient buckets expect (Note [step schedule]).
    const Tensor tokens = (*wte)(in[0]), positions = (*wpe)(positions_);
    Tensor x = (*drop)(ag::add(tokens, positions));
    const int64_t ckpt = c_.checkpoint_blocks < 0 ? c_.n_layer : c_.checkpoint_blocks;
    for (size_t i = 0; i < h->size(); ++i)
      x = c_.activation_checkpointing && int64_t(i) < ckpt ? checkpointed(h->at(i), {x}) : h->at(i)(x);
    return (*lm_head)((*ln_f)(x));
  }

 private:
  TransformerConfig c_;
  std::shared_ptr<Embedding> wte, wpe;
  std::shared_ptr<Dropout> drop;
  std::shared_ptr<ModuleList> h;
  std::shared_ptr<LayerNorm> ln_f;
  std::shared_ptr<Linear> lm_head;
  Tensor positions_;
};

}  // namespace

std::shared_ptr<Module> make_gpt(const TransformerConfig& c) {
  TagScope tag(MemTag::param);
  return std::make_shared<Gpt>(c);
}

}  // namespace zt::nn
