// model.type resmlp: a residual MLP on flattened images. An input projection to the width of
// model.hidden (every entry the same width), then one block per entry, h = h + W act(h) + b,
// then act and the classifier. Its module and entry live here alone (Note [model registry]).
#include <algorithm>

#include "../session.h"
#include "model_kind.h"
#include "shared.h"
#include "zt/autograd/functions.h"
#include "zt/core/allocator.h"
#include "zt/core/random.h"

namespace zt::apps {

namespace {

class ResidualMlp : public nn::Module {
 public:
  ResidualMlp(const MlpKeys& m, uint64_t seed) : relu_(m.activation == "relu") {
    Generator gen(seed);
    TagScope tag(MemTag::param);
    const int64_t width = m.hidden.front();
    in_ = add("in", std::make_shared<nn::Linear>(m.input_dim, width, true, gen));
    for (size_t b = 0; b < m.hidden.size(); ++b)
      blocks_.push_back(add("block" + std::to_string(b), std::make_shared<nn::Linear>(width, width, true, gen)));
    out_ = add("out", std::make_shared<nn::Linear>(width, m.num_classes, true, gen));
  }
  const char* type_name() const override { return "ResidualMlp"; }

 protected:
  Tensor forward(const Tensor& x) override {
    Tensor h = (*in_)(x);
    for (nn::Module* block : blocks_) h = ag::add(h, (*block)(act(h)));
    return (*out_)(act(h));
  }

 private:
  nn::Module* add(const std::string& name, std::shared_ptr<nn::Module> m) {
    nn::Module* raw = m.get();
    register_module(name, std::move(m));
    return raw;
  }
  Tensor act(const Tensor& h) const { return relu_ ? ag::relu(h) : ag::gelu(h); }
  bool relu_;
  nn::Module *in_ = nullptr, *out_ = nullptr;
  std::vector<nn::Module*> blocks_;
};

// in -> width, each block width x width, width -> classes, with biases; nullopt past int64.
std::optional<int64_t> parameter_count(const MlpKeys& m) {
  MlpKeys plain = m;  // the same layers as an MLP of input, width, classes ...
  plain.hidden = {m.hidden.front()};
  const std::optional<int64_t> ends = mlp_parameter_count(plain);
  const int64_t w = m.hidden.front(), blocks = int64_t(m.hidden.size());
  int64_t block = 0, all = 0, sum = 0;
  if (!ends || __builtin_mul_overflow(w, w + 1, &block) || __builtin_mul_overflow(block, blocks, &all) ||
      __builtin_add_overflow(*ends, all, &sum))
    return std::nullopt;
  return sum;  // ... plus the blocks
}

// Each block is width x width, and the count and its fp32 bytes fit in int64 (config::parse runs this).
void check(const config::Config& c, const std::string& source) {
  const MlpKeys& m = c.model.as<MlpKeys>();
  ZT_CHECK_AS(ErrorKind::config,
              !m.hidden.empty() && std::all_of(m.hidden.begin(), m.hidden.end(),
                                               [&](int64_t h) { return h == m.hidden.front(); }),
              "[config] ", source, ": model.hidden of a resmlp is one width per residual block, all equal; got ",
              config::detail::short_dump(m.hidden));
  check_parameter_count(parameter_count(m), source,
                        "model.input_dim " + std::to_string(m.input_dim) + ", model.hidden " +
                            config::detail::short_dump(m.hidden) + " and model.num_classes " +
                            std::to_string(m.num_classes));
}

}  // namespace

extern const ModelKind kResMlp = image_model(
    "resmlp", mlp_family(check),
    [](const config::Config& c, bool deferred) {
      return build_within_memory(*parameter_count(c.model.as<MlpKeys>()), deferred, [&] {
        return std::shared_ptr<nn::Module>(std::make_shared<ResidualMlp>(c.model.as<MlpKeys>(), c.seed));
      });
    },
    mlp_shape,
    input_dim_features, " (model.input_dim)");

}  // namespace zt::apps
