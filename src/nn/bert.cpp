// BERT (Devlin et al. 2019): post-LN encoder with Hugging Face's names under bert.* (q, k and v
// fused into attention.self.qkv), a masked-LM head whose decoder is the word embedding, and a
// classifier on the [CLS] position.
#include "zt/autograd/functions.h"
#include "zt/autograd/layers.h"
#include "zt/nn/transformer.h"

namespace zt::nn {
namespace {

std::shared_ptr<Linear> dense(int64_t in, int64_t out, Generator& gen) {
  return std::make_shared<Linear>(in, out, true, normal_init(gen, 0.02f), constant_init(0.f));
}

// A child holding one named submodule chain, so names read attention.output.dense etc.
class Holder : public Module {
 public:
  const char* type_name() const override { return "Holder"; }
  using Module::register_module;
  Tensor add_parameter(const std::string& name, const Shape& shape, Init init) {
    return register_parameter(name, shape, std::move(init));
  }

 protected:
  Tensor forward(const Tensor&) override { ZT_THROW("[bert] a name holder is not called"); }
};

// LayerNorm(x + dropout(dense(h))): BERT's "output" sublayers.
class AddNorm : public Module {
 public:
  AddNorm(int64_t in, const TransformerConfig& c, Generator& gen) {
    dense_ = dense(in, c.n_embd, gen);
    norm_ = std::make_shared<LayerNorm>(c.n_embd, 1e-12f);  // BERT's eps everywhere
    drop_ = std::make_shared<Dropout>(c.dropout);
    register_module("dense", dense_);
    register_module("LayerNorm", norm_);
    register_module("dropout", drop_);
  }
  const char* type_name() const override { return "AddNorm"; }
  Tensor run(const Tensor& h, const Tensor& residual) { return norm_->add_norm(residual, (*drop_)((*dense_)(h))).y; }

 protected:
  Tensor forward(const Tensor&) override { ZT_THROW("[bert] AddNorm needs the residual"); }

 private:
  std::shared_ptr<Linear> dense_;
  std::shared_ptr<LayerNorm> norm_;
  std::shared_ptr<Dropout> drop_;
};

// One ZeRO-3 unit: inputs {x [B, T, C], key mask [B, T] i32 or undefined}.
class BertLayer : public Module {
 public:
  BertLayer(const TransformerConfig& c, Generator& gen) : heads_(c.n_head), gelu_(c.gelu) {
    auto attention = std::make_shared<Holder>(), self = std::make_shared<Holder>(),
         intermediate = std::make_shared<Holder>();
    qkv_ = dense(c.n_embd, 3 * c.n_embd, gen);
    self->register_module("qkv", qkv_);
    attn_out_ = std::make_shared<AddNorm>(c.n_embd, c, gen);
    attention->register_module("self", self);
    attention->register_module("output", attn_out_);
    inter_ = dense(c.n_embd, 4 * c.n_embd, gen);
    intermediate->register_module("dense", inter_);
    out_ = std::make_shared<AddNorm>(4 * c.n_embd, c, gen);
    register_module("attention", attention);
    register_module("intermediate", intermediate);
    register_module("output", out_);
    set_zero_unit(true);
  }
  const char* type_name() const override { return "BertLayer"; }

 protected:
  Tensor forward(const Tensor& x) override { return forward_inputs({x}); }
  Tensor forward_inputs(const std::vector<Tensor>& in) override {
    const Tensor* mask = in.size() > 1 && in[1].defined() ? &in[1] : nullptr;
    Tensor h = attn_out_->run(ag::attention((*qkv_)(in[0]), heads_, /*causal=*/false, mask), in[0]);
    return out_->run(ag::linear_gelu(h, inter_->weight, &inter_->bias, gelu_), h);  // dense + GELU, fused backward
  }

 private:
  int64_t heads_;
  ops::Gelu gelu_;
  std::shared_ptr<Linear> qkv_, inter_;
  std::shared_ptr<AddNorm> attn_out_, out_;
};

class BertEmbeddings : public Module {
 public:
  BertEmbeddings(const TransformerConfig& c, Generator& gen) {
    word = std::make_shared<Embedding>(c.vocab_size, c.n_embd, normal_init(gen, 0.02f));
    position = std::make_shared<Embedding>(c.block_size, c.n_embd, normal_init(gen, 0.02f));
    type = std::make_shared<Embedding>(c.type_vocab_size, c.n_embd, normal_init(gen, 0.02f));
    norm = std::make_shared<LayerNorm>(c.n_embd, 1e-12f);
    drop = std::make_shared<Dropout>(c.dropout);
    register_module("word_embeddings", word);
    register_module("position_embeddings", position);
    register_module("token_type_embeddings", type);
    register_module("LayerNorm", norm);
    register_module("dropout", drop);
  }
  const char* type_name() const override { return "BertEmbeddings"; }
  std::shared_ptr<Embedding> word, position, type;

 protected:
  Tensor forward(const Tensor& ids) override { return forward_inputs({ids}); }
  // {ids [B, T], token types [B, T] or undefined (all 0)}
  Tensor forward_inputs(const std::vector<Tensor>& in) override {
    const int64_t B = in[0].size(0), T = in[0].size(1);
    if (!positions_.defined() || positions_.numel() != T || positions_.device() != in[0].device())
      positions_ = position_ids(T, in[0].device());
    Tensor types = in.size() > 1 && in[1].defined()
                       ? in[1]
                       : Tensor::from_ints(std::vector<int32_t>(size_t(B * T), 0), {B, T}, in[0].device());
    // In registration order (an argument list's is unspecified), as in gpt.cpp.
    const Tensor words = (*word)(in[0]), places = (*position)(positions_), kinds = (*type)(types);
    Tensor x = ag::add(ag::add(words, places), kinds);
    return (*drop)((*norm)(x));
  }

 private:
  std::shared_ptr<LayerNorm> norm;
  std::shared_ptr<Dropout> drop;
  Tensor positions_;
};

// tanh(dense(x[:, 0])): the [CLS] state as BertForSequenceClassification sees it. One stage-3 unit.
class BertPooler : public Module {
 public:
  BertPooler(const TransformerConfig& c, Generator& gen) : dense_(dense(c.n_embd, c.n_embd, gen)) {
    register_module("dense", dense_);
    set_zero_unit(true);
  }
  const char* type_name() const override { return "BertPooler"; }

 protected:
  Tensor forward(const Tensor& x) override { return ag::tanh((*dense_)(ag::select(x, 1, 0))); }

 private:
  std::shared_ptr<Linear> dense_;
};

class BertEncoder : public Module {
 public:
  BertEncoder(const TransformerConfig& c, Generator& gen, bool with_pooler = false) : c_(c) {
    embeddings = std::make_shared<BertEmbeddings>(c, gen);
    auto encoder = std::make_shared<Holder>();
    layers_ = std::make_shared<ModuleList>();
    for (int64_t i = 0; i < c.n_layer; ++i) layers_->add(std::make_shared<BertLayer>(c, gen));
    encoder->register_module("layer", layers_);
    register_module("embeddings", embeddings);
    register_module("encoder", encoder);
    if (with_pooler) {
      pooler = std::make_shared<BertPooler>(c, gen);
      register_module("pooler", pooler);
    }
  }
  const char* type_name() const override { return "BertEncoder"; }
  std::shared_ptr<BertEmbeddings> embeddings;
  std::shared_ptr<BertPooler> pooler;  // null unless built for a classifier with one

 protected:
  Tensor forward(const Tensor& ids) override { return forward_inputs({ids}); }
  // {ids [B, T] i32, attention mask [B, T] i32 (optional), token types [B, T] i32 (optional)}
  Tensor forward_inputs(const std::vector<Tensor>& in) override {
    ZT_CHECK(!in.empty() && in[0].dtype() == DType::i32 && in[0].dim() == 2,
             "[bert] input must be token ids [B, T] i32");
    const int64_t T = in[0].size(1);
    ZT_CHECK(T >= 1 && T <= c_.block_size, "[bert] sequence length ", T, " exceeds model.block_size ", c_.block_size);
    Tensor mask = in.size() > 1 ? in[1] : Tensor();
    Tensor types = in.size() > 2 ? in[2] : Tensor();
    Tensor x = (*embeddings)(std::vector<Tensor>{in[0], types});
    const int64_t ckpt = c_.checkpoint_blocks < 0 ? c_.n_layer : c_.checkpoint_blocks;
    for (size_t i = 0; i < layers_->size(); ++i)
      x = c_.activation_checkpointing && int64_t(i) < ckpt ? checkpointed(layers_->at(i), {x, mask})
                                                           : layers_->at(i)(std::vector<Tensor>{x, mask});
    return x;
  }

 private:
  TransformerConfig c_;
  std::shared_ptr<ModuleList> layers_;
};

// Masked-LM head: transform (dense, GELU, LayerNorm), then the tied decoder plus a bias.
class BertMlmHead : public Module {
 public:
  BertMlmHead(const TransformerConfig& c, Generator& gen, const Tensor& word_embeddings) : gelu_(c.gelu) {
    auto predictions = std::make_shared<Holder>(), transform = std::make_shared<Holder>();
    dense_ = dense(c.n_embd, c.n_embd, gen);
    norm_ = std::make_shared<LayerNorm>(c.n_embd, 1e-12f);
    transform->register_module("dense", dense_);
    transform->register_module("LayerNorm", norm_);
    decoder_ = std::make_shared<Linear>(word_embeddings);
    predictions->register_module("transform", transform);
    predictions->register_module("decoder", decoder_);
    bias = predictions->add_parameter("bias", {c.vocab_size}, constant_init(0.f));
    register_module("predictions", predictions);
    set_zero_unit(true);  // one stage-3 unit (its parameters sit in holders that are never called)
  }
  const char* type_name() const override { return "BertMlmHead"; }
  Tensor bias;

 protected:
  Tensor forward(const Tensor& x) override {
    return ag::add((*decoder_)((*norm_)(ag::linear_gelu(x, dense_->weight, &dense_->bias, gelu_))), bias);
  }

 private:
  ops::Gelu gelu_;
  std::shared_ptr<Linear> dense_, decoder_;
  std::shared_ptr<LayerNorm> norm_;
};

class BertForMaskedLM : public Module {
 public:
  explicit BertForMaskedLM(const TransformerConfig& c) {
    Generator gen(c.seed);
    bert_ = std::make_shared<BertEncoder>(c, gen);
    cls_ = std::make_shared<BertMlmHead>(c, gen, bert_->embeddings->word->weight);
    register_module("bert", bert_);
    register_module("cls", cls_);
  }
  const char* type_name() const override { return "BertForMaskedLM"; }

 protected:
  Tensor forward(const Tensor& ids) override { return forward_inputs({ids}); }
  Tensor forward_inputs(const std::vector<Tensor>& in) override { return (*cls_)((*bert_)(in)); }

 private:
  std::shared_ptr<BertEncoder> bert_;
  std::shared_ptr<BertMlmHead> cls_;
};

// Classifier on the [CLS] position: its state (through the pooler when there is one), dropout, one Linear.
class BertForSequenceClassification : public Module {
 public:
  BertForSequenceClassification(const TransformerConfig& c, int64_t num_labels, bool pooler) {
    ZT_CHECK_AS(ErrorKind::config, num_labels >= 2, "[bert] model.num_classes must be >= 2, got ", num_labels);
    Generator gen(c.seed);
    bert_ = std::make_shared<BertEncoder>(c, gen, pooler);
    drop_ = std::make_shared<Dropout>(c.dropout);
    classifier_ = dense(c.n_embd, num_labels, gen);
    register_module("bert", bert_);
    register_module("dropout", drop_);
    register_module("classifier", classifier_);
  }
  const char* type_name() const override { return "BertForSequenceClassification"; }

 protected:
  Tensor forward(const Tensor& ids) override { return forward_inputs({ids}); }
  Tensor forward_inputs(const std::vector<Tensor>& in) override {
    const Tensor x = (*bert_)(in);
    return (*classifier_)((*drop_)(bert_->pooler ? (*bert_->pooler)(x) : ag::select(x, 1, 0)));
  }

 private:
  std::shared_ptr<BertEncoder> bert_;
  std::shared_ptr<Dropout> drop_;
  std::shared_ptr<Linear> classifier_;
};

}  // namespace

std::shared_ptr<Module> make_bert(const TransformerConfig& c, const std::string& head, int64_t num_labels,
                                  bool pooler) {
  c.validate("bert");
  TagScope tag(MemTag::param);
  if (head == "mlm") return std::make_shared<BertForMaskedLM>(c);
  ZT_CHECK_AS(ErrorKind::config, head == "classify", "[bert] unknown head '", head, "' (allowed: mlm, classify)");
  return std::make_shared<BertForSequenceClassification>(c, num_labels, pooler);
}

}  // namespace zt::nn
