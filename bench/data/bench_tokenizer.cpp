// Encode speed of both tokenizers on one text (default: Moby-Dick, data/moby-dick/data.txt), in
// MB/s of UTF-8 input: the first pass (GPT-2's piece cache empty) and the best of the next ones.
// Run: bench_tokenizer [--text FILE] [--repeat R] [--gpt2 DIR] [--bert DIR]; prints JSON lines.
// bench/data/tokenizer_peer.js times the npm packages' own JS on the same text.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "zt/core/error.h"
#include "zt/data/tokenizer.h"

using namespace zt;
using Clock = std::chrono::steady_clock;

int main(int argc, char** argv) {
  std::string text_path = "data/moby-dick/data.txt", gpt2_dir = "data/gpt2", bert_dir = "data/bert";
  int repeat = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--text")
      text_path = v;
    else if (k == "--repeat")
      repeat = std::max(1, std::atoi(v.c_str()));
    else if (k == "--gpt2")
      gpt2_dir = v;
    else if (k == "--bert")
      bert_dir = v;
    else
      return std::fprintf(stderr, "bench_tokenizer: unknown option %s\n", k.c_str()), 2;
  }
  try {
    std::ifstream in(text_path, std::ios::binary);
    ZT_CHECK(in.good(), "[bench] cannot open ", text_path, "; scripts/setup.sh fetches it");
    std::ostringstream buf;
    buf << in.rdbuf();
    const std::string text = buf.str();
    const double mb = double(text.size()) / 1e6;
    for (const auto& [kind, dir] : {std::pair{"gpt2", gpt2_dir}, std::pair{"bert", bert_dir}}) {
      const auto tok = data::load_tokenizer(kind, dir);
      double first = 0, best = 1e30;
      size_t tokens = 0;
      for (int r = 0; r <= repeat; ++r) {
        const auto t0 = Clock::now();
        tokens = tok->encode(text).size();
        const double s = std::chrono::duration<double>(Clock::now() - t0).count();
        (r == 0 ? first : best) = r == 0 ? s : std::min(best, s);
      }
      const nlohmann::json row = {{"bench", "tokenizer"},  {"tokenizer", kind}, {"text", text_path},
                                  {"bytes", text.size()},  {"tokens", tokens},  {"first_mb_per_s", mb / first},
                                  {"mb_per_s", mb / best}, {"repeat", repeat}};
      std::printf("%s\n", row.dump().c_str());
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "bench_tokenizer: %s\n", e.what());
    return 1;
  }
  return 0;
}
