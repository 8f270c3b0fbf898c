// `zerotrain generate`: text from a trained language model, one sampled token at a time
// (sampling.h), printed as it comes; no autograd, dropout off, fp32.
#include <chrono>
#include <cstdio>

#include "commands.h"
#include "sampling.h"
#include "session.h"
#include "zt/autograd/autograd.h"
#include "zt/data/tokenizer.h"

namespace zt::apps {

namespace {

// The model's context length, model.block_size (default 1024, GPT-2's). Read from the raw JSON
// until ModelConfig carries it.
int64_t block_size_of(const config::Config& cfg) {
  const auto model = cfg.raw.find("model");
  if (model == cfg.raw.end() || !model->is_object()) return 1024;
  const auto b = model->find("block_size");
  if (b == model->end()) return 1024;
  ZT_CHECK_AS(ErrorKind::config, b->is_number_integer() && b->get<int64_t>() > 0,
              "[config] 'model.block_size' must be an integer > 0, got ", b->dump());
  return b->get<int64_t>();
}

// How much of `text` will not change when more tokens follow: all but a trailing incomplete
// UTF-8 character (a byte-level token may end mid-character) or trailing U+FFFD, which a decoder
// that replaces invalid bytes writes for one.
size_t settled_prefix(const std::string& text) {
  size_t end = text.size();
  while (end >= 3 && text.compare(end - 3, 3, "\xEF\xBF\xBD") == 0) end -= 3;
  size_t i = end;
  int cont = 0;
  while (i > 0 && cont < 3 && (uint8_t(text[i - 1]) & 0xC0) == 0x80) --i, ++cont;
  if (i == 0) return end;
  const auto lead = uint8_t(text[i - 1]);
  const int need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
  return need > cont + 1 ? i - 1 : end;
}

void put(const std::string& s) {
  std::fwrite(s.data(), 1, s.size(), stdout);
  std::fflush(stdout);
}

}  // namespace

int run_generate(const config::Config& cfg, const GenerateOptions& opt) {
  ZT_CHECK_AS(ErrorKind::config, cfg.model.type == "gpt", "[generate] model.type '", cfg.model.type,
              "' is not a language model (generate needs a gpt model)");
  const int64_t block = block_size_of(cfg);
  const std::unique_ptr<data::Tokenizer> tok = data::load_tokenizer("gpt2", opt.tokenizer_dir);
  auto model = build_model(cfg);
  load_weights(*model, opt.weights);
  model->train(false);
  autograd::NoGradGuard no_grad;

  const int32_t eot = tok->special("<|endoftext|>");
  std::vector<int32_t> ids = tok->encode(opt.prompt);
  if (ids.empty()) ids.push_back(eot);  // GPT-2 starts a text after <|endoftext|>
  Generator gen(opt.seed.value_or(cfg.seed));
  put(opt.prompt);

  std::vector<int32_t> generated;
  std::string text;
  size_t printed = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t n = 0; n < opt.tokens; ++n) {
    const int64_t T = std::min<int64_t>(block, int64_t(ids.size()));
    const std::vector<int32_t> ctx(ids.end() - T, ids.end());  // the last block_size tokens
    const Tensor logits = (*model)(std::vector<Tensor>{Tensor::from_ints(ctx, {1, T})});
    ZT_CHECK_AS(ErrorKind::internal, logits.dim() == 3 && logits.size(0) == 1 && logits.size(1) == T,
                "[generate] the model returned logits of shape ", shape_str(logits.shape()), " for [1, ", T,
                "] tokens (expected [1, ", T, ", V])");
    const std::vector<float> last = logits.select(0, 0).select(0, T - 1).to_vector();
    // A vocabulary padded past the tokenizer's (llm.c pads 50257 to 50304) is never sampled there.
    const int64_t V = std::min<int64_t>(int64_t(last.size()), tok->vocab_size());
    const int32_t next = sample_token(last.data(), V, opt.temperature, opt.top_k, gen);
    if (next == eot) break;
    ids.push_back(next);
    generated.push_back(next);
    text = tok->decode(generated);
    if (const size_t settled = settled_prefix(text); settled > printed) {
      put(text.substr(printed, settled - printed));
      printed = settled;
    }
  }
  if (text.size() > printed) put(text.substr(printed));
  put("\n");
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::fprintf(stderr, "zerotrain: generated %zu tokens in %.2f s (%.1f tokens/s)\n", generated.size(), s,
               double(generated.size()) / std::max(s, 1e-9));
  return 0;
}

}  // namespace zt::apps
