// `zerotrain generate`: text from a trained language model, one sampled token at a time
// (sampling.h), printed as it comes; no autograd, dropout off, fp32.
#include <chrono>
#include <filesystem>
#include <cstdio>

#include "commands.h"
#include "models/model_kind.h"
#include "sampling.h"
#include "session.h"
#include "zt/autograd/autograd.h"
#include "zt/data/tokenizer.h"

namespace zt::apps {

namespace {

void put(const std::string& s) {
  std::fwrite(s.data(), 1, s.size(), stdout);
  std::fflush(stdout);
}

}  // namespace

// --tokenizer; else the one kept beside the weights (a run folder, a Hugging Face folder); else
// the model's default from --tokenizer-dir. Said in one line when it is not the default.
std::unique_ptr<data::Tokenizer> generate_tokenizer(const GenerateOptions& opt, const char* fallback) {
  std::string spec = opt.tokenizer;
  if (spec.empty() && opt.tokenizer_dir.empty()) {
    const std::filesystem::path w(opt.weights);
    const std::string folder = std::filesystem::is_directory(w) ? w.string() : w.parent_path().string();
    for (const char* file : {"tokenizer.json", "tokenizer.model", "encoder.json"})
      if (!folder.empty() && std::filesystem::exists(folder + "/" + file)) {
        spec = folder;
        break;
      }
  }
  if (spec.empty())
    return data::load_tokenizer(fallback, opt.tokenizer_dir.empty() ? "data/" + std::string(fallback) : opt.tokenizer_dir);
  std::fprintf(stderr, "zerotrain: tokenizer: %s\n", spec.c_str());
  return data::load_tokenizer_spec(spec, "data");
}

int run_generate(const config::Config& cfg, const GenerateOptions& opt) {
  const char* tokenizer = model_kind(cfg).generates_with;
  ZT_CHECK_AS(ErrorKind::config, tokenizer, "[generate] model.type '", cfg.model.type,
              "' is not a language model (generate needs a gpt model)");
  const int64_t block = model_kind(cfg).shape(cfg).block_size;
  const std::unique_ptr<data::Tokenizer> tok = generate_tokenizer(opt, tokenizer);
  auto model = build_model(cfg);
  load_weights(cfg, *model, opt.weights);
  const Device dev = open_run_device(cfg);  // each step's logits row comes down to be sampled
  model->to(dev);
  model->train(false);
  autograd::NoGradGuard no_grad;

  // The token a text ends with (GPT-2's <|endoftext|>, Llama 3's <|end_of_text|>, SentencePiece's </s>),
  // and what an empty prompt starts from (that token for GPT-2, else a begin-of-text token).
  int32_t eot = -1, bos = -1;
  for (const char* t : {"<|endoftext|>", "<|end_of_text|>", "</s>"})
    if (eot < 0) eot = tok->special(t);
  for (const char* t : {"<|endoftext|>", "<|begin_of_text|>", "<s>"})
    if (bos < 0) bos = tok->special(t);
  std::vector<int32_t> ids = tok->encode(opt.prompt);
  ZT_CHECK_AS(ErrorKind::config, !ids.empty() || bos >= 0, "[generate] an empty --prompt needs a start token, and the ",
              tok->name(), " tokenizer has none (give a prompt)");
  if (ids.empty()) ids.push_back(bos);
  Generator gen(opt.seed.value_or(cfg.seed));
  put(opt.prompt);

  int64_t generated = 0;
  std::string pending;  // decoded bytes not printed yet: an incomplete UTF-8 character
  const auto t0 = std::chrono::steady_clock::now();
  for (; generated < opt.tokens; ++generated) {
    const int64_t T = std::min<int64_t>(block, int64_t(ids.size()));
    const std::vector<int32_t> ctx(ids.end() - T, ids.end());  // the last block_size tokens
    const Tensor logits = (*model)(std::vector<Tensor>{Tensor::from_ints(ctx, {1, T}, dev)});
    ZT_CHECK_AS(ErrorKind::internal, logits.dim() == 3 && logits.size(0) == 1 && logits.size(1) == T,
                "[generate] the model returned logits of shape ", shape_str(logits.shape()), " for [1, ", T,
                "] tokens (expected [1, ", T, ", V])");
    const std::vector<float> last = logits.select(0, 0).select(0, T - 1).to_vector();
    // A vocabulary padded past the tokenizer's (llm.c pads 50257 to 50304) is never sampled there.
    const int64_t V = std::min<int64_t>(int64_t(last.size()), tok->vocab_size());
    const int32_t next = sample_token(last.data(), V, opt.temperature, opt.top_k, gen);
    if (next == eot) break;
    ids.push_back(next);
    pending += tok->decode({next});  // GPT-2's decode is the tokens' bytes, concatenated
    const size_t n = complete_utf8_prefix(pending);
    put(pending.substr(0, n));
    pending.erase(0, n);
  }
  put(pending + "\n");
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::fprintf(stderr, "zerotrain: generated %lld tokens in %.2f s (%.1f tokens/s)\n", (long long)generated, s,
               double(generated) / std::max(s, 1e-9));
  return 0;
}

}  // namespace zt::apps
