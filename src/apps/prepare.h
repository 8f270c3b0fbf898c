#pragma once
// `zerotrain prepare`: corpora -> token shards (--task lm) or labelled passages (--task
// sotu-party); main.cpp registers it with add_prepare_command and runs it like the others.
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace zt::apps {

struct PrepareCliOptions {
  std::string task = "lm";    // lm | sotu-party
  std::string tokenizer;      // gpt2 | bert
  std::string tokenizer_dir;  // default: <data-dir>/<tokenizer>
  std::string out;
  std::string data_dir = "data";
  std::string sources = "sotu,moby-dick";  // lm
  std::vector<std::string> inputs;         // lm: your own text instead of sources
  std::string text_key = "text";           // lm: the text field of *.jsonl inputs
  double val_fraction = 0.05;              // lm
  int max_len = 128;                       // sotu-party
};

void add_prepare_command(CLI::App& app, PrepareCliOptions& o);
int run_prepare(const PrepareCliOptions& o);

}  // namespace zt::apps
