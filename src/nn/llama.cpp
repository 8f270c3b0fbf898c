// The Llama family's decoder (zt/nn/llama.h): pre-norm blocks of RMSNorm, rotary grouped-query
// attention and a SwiGLU MLP, as Hugging Face's LlamaForCausalLM computes them.
#include "zt/nn/llama.h"

#include <string>

#include "zt/autograd/functions.h"
#include "zt/autograd/layers.h"
#include "zt/nn/transformer.h"
#include "zt/ops/transformer.h"

namespace zt::nn {
namespace {

class RmsNorm : public Module {
 public:
  RmsNorm(int64_t dim, float eps) : eps_(eps) { weight = register_parameter("weight", {dim}, constant_init(1.f)); }
  const char* type_name() const override { return "RMSNorm"; }
  // x + r and its norm in one pass (ag::add_rms_norm), called as the module is.
  ag::AddNorm add_norm(const Tensor& x, const Tensor& r) {
    Tensor sum;
    Tensor y = hooked([&] {
      ag::AddNorm a = ag::add_rms_norm(x, r, weight, eps_);
      sum = a.sum;
      return a.y;
    });
    return {sum, y};
  }
  Tensor weight;

 protected:
  Tensor forward(const Tensor& x) override { return ag::rms_norm(x, weight, eps_); }

 private:
  float eps_;
};

// The rotary tables of the longest sequence seen so far on the device, shared by every block; they
// only grow, so a checkpointed block's recompute in backward finds rows for its length whatever
// ran in between (an evaluation of shorter sequences).
struct RopeCache {
  ops::RopeTables tables;
  int64_t T = 0;
  Device device = Device::cpu();
};

class LlamaAttention : public Module {
 public:
  LlamaAttention(const LlamaConfig& c, Generator& gen, std::shared_ptr<const RopeCache> rope)
      : heads_(c.n_head), kv_heads_(c.n_kv_head), rope_(std::move(rope)) {
    const int64_t D = c.n_embd / c.n_head;
    qkv_proj = std::make_shared<Linear>(c.n_embd, (c.n_head + 2 * c.n_kv_head) * D, c.qkv_bias,
                                        normal_init(gen, c.init_std), constant_init(0.f));
    o_proj = std::make_shared<Linear>(c.n_embd, c.n_embd, false, normal_init(gen, c.init_std), Init());
    register_module("qkv_proj", qkv_proj);
    register_module("o_proj", o_proj);
  }
  const char* type_name() const override { return "LlamaAttention"; }
  std::shared_ptr<Linear> qkv_proj, o_proj;

 protected:
  Tensor forward(const Tensor& x) override {
    const Tensor qkv = ag::rope((*qkv_proj)(x), heads_, kv_heads_, rope_->tables);
    return (*o_proj)(ag::attention(qkv, heads_, /*causal=*/true, nullptr, kv_heads_));
  }

 private:
  int64_t heads_, kv_heads_;
  std::shared_ptr<const RopeCache> rope_;
};

class LlamaMlp : public Module {
 public:
  LlamaMlp(const LlamaConfig& c, Generator& gen) {
    gate_up_proj = std::make_shared<Linear>(c.n_embd, 2 * c.intermediate_size, false, normal_init(gen, c.init_std),
                                            Init());
    down_proj = std::make_shared<Linear>(c.intermediate_size, c.n_embd, false, normal_init(gen, c.init_std), Init());
    register_module("gate_up_proj", gate_up_proj);
    register_module("down_proj", down_proj);
  }
  const char* type_name() const override { return "LlamaMlp"; }
  std::shared_ptr<Linear> gate_up_proj, down_proj;

 protected:
  Tensor forward(const Tensor& x) override { return (*down_proj)(ag::swiglu((*gate_up_proj)(x))); }
};

// One ZeRO-3 unit: x + attn(input_layernorm(x)), then + mlp(post_attention_layernorm(x)).
class LlamaBlock : public Module {
 public:
  LlamaBlock(const LlamaConfig& c, Generator& gen, std::shared_ptr<const RopeCache> rope) {
    input_layernorm = std::make_shared<RmsNorm>(c.n_embd, c.rms_norm_eps);
    self_attn = std::make_shared<LlamaAttention>(c, gen, std::move(rope));
    post_attention_layernorm = std::make_shared<RmsNorm>(c.n_embd, c.rms_norm_eps);
    mlp = std::make_shared<LlamaMlp>(c, gen);
    register_module("input_layernorm", input_layernorm);
    register_module("self_attn", self_attn);
    register_module("post_attention_layernorm", post_attention_layernorm);
    register_module("mlp", mlp);
    set_zero_unit(true);
  }
  const char* type_name() const override { return "LlamaBlock"; }

 protected:
  Tensor forward(const Tensor& x) override {
    const ag::AddNorm h = post_attention_layernorm->add_norm(x, (*self_attn)((*input_layernorm)(x)));
    return ag::add(h.sum, (*mlp)(h.y));
  }

 private:
  std::shared_ptr<RmsNorm> input_layernorm, post_attention_layernorm;
  std::shared_ptr<LlamaAttention> self_attn;
  std::shared_ptr<LlamaMlp> mlp;
};

// The decoder without its head, under the name "model" as Hugging Face's LlamaModel.
class LlamaModel : public Module {
 public:
  LlamaModel(const LlamaConfig& c, Generator& gen, const std::shared_ptr<const RopeCache>& rope) {
    embed_tokens = std::make_shared<Embedding>(c.vocab_size, c.n_embd, normal_init(gen, c.init_std));
    layers = std::make_shared<ModuleList>();
    for (int64_t i = 0; i < c.n_layer; ++i) layers->add(std::make_shared<LlamaBlock>(c, gen, rope));
    norm = std::make_shared<RmsNorm>(c.n_embd, c.rms_norm_eps);
    register_module("embed_tokens", embed_tokens);
    register_module("layers", layers);
    register_module("norm", norm);
  }
  const char* type_name() const override { return "LlamaModel"; }
  std::shared_ptr<Embedding> embed_tokens;
  std::shared_ptr<ModuleList> layers;
  std::shared_ptr<RmsNorm> norm;

 protected:
  Tensor forward(const Tensor&) override { ZT_THROW("[llama] the decoder is run by its causal LM"); }
};

class LlamaForCausalLM : public Module {
 public:
  explicit LlamaForCausalLM(const LlamaConfig& c) : c_(c), rope_(std::make_shared<RopeCache>()) {
    c.validate();
    Generator gen(c.seed);
    model = std::make_shared<LlamaModel>(c, gen, rope_);
    lm_head = c.tie_word_embeddings
                  ? std::make_shared<Linear>(model->embed_tokens->weight)
                  : std::make_shared<Linear>(c.n_embd, c.vocab_size, false, normal_init(gen, c.init_std), Init());
    register_module("model", model);
    register_module("lm_head", lm_head);
  }
  const char* type_name() const override { return "LlamaForCausalLM"; }

 protected:
  Tensor forward(const Tensor& ids) override { return forward_inputs({ids}); }
  Tensor forward_inputs(const std::vector<Tensor>& in) override {
    ZT_CHECK(!in.empty() && in[0].dtype() == DType::i32 && in[0].dim() == 2,
             "[llama] input must be token ids [B, T] i32");
    const int64_t T = in[0].size(1);
    ZT_CHECK(T >= 1 && T <= c_.block_size, "[llama] sequence length ", T, " exceeds model.block_size ",
             c_.block_size);
    if (rope_->T < T || rope_->device != in[0].device())
      *rope_ = {ops::rope_tables(T, c_.n_embd / c_.n_head, c_.rope_theta, in[0].device()), T, in[0].device()};
    Tensor x = (*model->embed_tokens)(in[0]);
    const int64_t ckpt = c_.checkpoint_blocks < 0 ? c_.n_layer : c_.checkpoint_blocks;
    for (size_t i = 0; i < model->layers->size(); ++i) {
      Module& block = model->layers->at(i);
      x = c_.activation_checkpointing && int64_t(i) < ckpt ? checkpointed(block, {x}) : block(x);
    }
    return (*lm_head)((*model->norm)(x));
  }

 private:
  LlamaConfig c_;
  std::shared_ptr<RopeCache> rope_;
  std::shared_ptr<LlamaModel> model;
  std::shared_ptr<Linear> lm_head;
};

}  // namespace

void LlamaConfig::validate() const {
  auto positive = [](int64_t v, const char* key) {
    ZT_CHECK_AS(ErrorKind::config, v > 0, "[llama] model.", key, " must be positive, got ", v, " (nearest valid: 1)");
  };
  positive(vocab_size, "vocab_size");
  positive(block_size, "block_size");
  positive(n_layer, "n_layer");
  positive(n_head, "n_head");
  positive(n_kv_head, "n_kv_head");
  positive(n_embd, "n_embd");
  positive(intermediate_size, "intermediate_size");
  ZT_CHECK_AS(ErrorKind::config, n_embd % n_head == 0, "[llama] model.n_embd ", n_embd,
              " must be a multiple of model.n_head ", n_head);
  ZT_CHECK_AS(ErrorKind::config, n_head % n_kv_head == 0, "[llama] model.n_head ", n_head,
              " must be a multiple of model.n_kv_head ", n_kv_head);
  ZT_CHECK_AS(ErrorKind::config, (n_embd / n_head) % 2 == 0, "[llama] rotary embeddings need an even head size: ",
              "model.n_embd / model.n_head = ", n_embd / n_head);
  ZT_CHECK_AS(ErrorKind::config, rope_theta > 0.f, "[llama] model.rope_theta must be > 0, got ", rope_theta);
  ZT_CHECK_AS(ErrorKind::config, rms_norm_eps > 0.f, "[llama] model.rms_norm_eps must be > 0, got ", rms_norm_eps);
}

std::shared_ptr<Module> make_llama(const LlamaConfig& c) {
  TagScope tag(MemTag::param);
  return std::make_shared<LlamaForCausalLM>(c);
}

}  // namespace zt::nn
