#pragma once
// The commands behind `zerotrain <command>`; main.cpp parses the command line (CLI11) and
// turns their errors into one line on stderr and an exit status.
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

struct TokenizeOptions {
  std::string tokenizer;  // gpt2 | bert
  std::string dir;        // the tokenizer's files (default: data/<tokenizer>)
  bool lines = false;     // one JSON array per input line instead of one for all of stdin
};

int run_train(const config::Config& cfg, comm::Group& group);
int run_eval(const config::Config& cfg, const std::string& weights);
int run_estimate(const config::Config& cfg, const EstimateOptions& opt);
int run_tokenize(const TokenizeOptions& opt);  // stdin -> JSON ids on stdout

}  // namespace zt::apps
