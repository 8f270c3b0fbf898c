#pragma once
// The commands behind `zerotrain <command>`; main.cpp parses the command line (CLI11) and
// turns their errors into one line on stderr and an exit status.
#include <cstdint>
#include <optional>
#include <string>

#include "zt/comm/group.h"
#include "zt/config/config.h"

namespace zt::apps {

// --memory-gib stays below 2^33 GiB, so its bytes fit in int64.
inline constexpr double kMaxMemoryGib = 8589934592.0;

struct EstimateOptions {
  int world = 1;          // ranks to plan for
  double memory_gib = 0;  // > 0: also the largest model whose states fit this many GiB per rank
  bool json = false;      // machine-readable JSON on stdout instead of the table
};

struct PlotOptions {
  std::string run_dir;  // holds metrics.jsonl
  std::string out;      // "" = <run_dir>/loss.png
};

struct BaselineOptions {
  std::string data_dir;        // train_*.bin and val_*.bin token shards
  int64_t vocab_size = 50257;  // GPT-2's
};

constexpr int64_t kMaxGenerateTokens = 1000000;  // about 3 hours at 100 tokens/s; more is a typo

struct GenerateOptions {
  std::string weights;  // safetensors, or a Hugging Face folder
  std::string prompt;
  std::string tokenizer;      // a spec (gpt2, a tokenizer.json, ...); "": the weights' folder's, else the model's
  std::string tokenizer_dir;  // the model's default tokenizer files ("" = data/<its name>)
  int64_t tokens = 100;          // at most this many new tokens (fewer if <|endoftext|> is drawn)
  float temperature = 0.8f;      // 0 = greedy
  int64_t top_k = 200;           // 0 = all tokens
  std::optional<uint64_t> seed;  // default: the configuration's seed
};

struct TokenizeOptions {
  std::string tokenizer;  // gpt2 | bert | a tokenizer.json, .model or folder (data::resolve_tokenizer_spec)
  std::string dir;        // gpt2's or bert's files (default: data/<tokenizer>)
  bool lines = false;     // one JSON array per input line instead of one for all of stdin
  bool decode = false;    // stdin holds ids; print their text
};

int run_train(const config::Config& cfg, comm::Group& group);
// json: the task's scores as one JSON object on stdout (full precision) instead of its line.
int run_eval(const config::Config& cfg, const std::string& weights, bool json = false);
int run_estimate(const config::Config& cfg, const EstimateOptions& opt);
int run_tokenize(const TokenizeOptions& opt);  // stdin -> JSON ids on stdout (--decode: ids -> text)
int run_plot(const PlotOptions& opt);
int run_baseline(const BaselineOptions& opt);
int run_generate(const config::Config& cfg, const GenerateOptions& opt);

}  // namespace zt::apps
