// `zerotrain baseline --data DIR`: the held-out loss of count-based models (Note [n-gram
// baseline]) on a folder of token shards, the numbers a language model must beat.
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "zt/core/atomic_file.h"
#include "zt/core/error.h"
#include "zt/data/ngram.h"
#include "zt/data/token_shard.h"
#include "zt/data/token_stream.h"

namespace zt::apps {

int run_baseline(const BaselineOptions& opt) {
  const std::vector<std::string> train_files = data::list_token_shards(opt.data_dir, "train"),
                                 val_files = data::list_token_shards(opt.data_dir, "val");
  const data::TokenStream train = data::TokenStream::map_files(train_files),
                          val = data::TokenStream::map_files(val_files);  // read in passes, never held
  const data::NgramBaseline r = data::ngram_baseline(train, val, opt.vocab_size);
  std::printf("train: %lld tokens in %zu shard%s; validation: %lld tokens in %zu shard%s\n", (long long)r.train_tokens,
              train_files.size(), train_files.size() == 1 ? "" : "s", (long long)r.val_tokens, val_files.size(),
              val_files.size() == 1 ? "" : "s");
  std::printf("unigram (add-one):                   %.4f nats/token (perplexity %.1f)\n", r.unigram_loss,
              std::exp(r.unigram_loss));
  std::printf("bigram (interpolated, lambda %.2f):  %.4f nats/token (perplexity %.1f)\n", r.lambda, r.bigram_loss,
              std::exp(r.bigram_loss));
  const nlohmann::json j = {
      {"unigram_loss", r.unigram_loss}, {"bigram_loss", r.bigram_loss},        {"lambda", r.lambda},
      {"train_tokens", r.train_tokens}, {"val_tokens", r.val_tokens},          {"heldout_tokens", r.heldout_tokens},
      {"vocab_size", opt.vocab_size},   {"add_k", data::NgramOptions{}.add_k}, {"train_shards", train_files.size()},
      {"val_shards", val_files.size()}};
  const std::string out = opt.data_dir + "/baseline.json";
  write_file_atomic(out, j.dump(2) + "\n", ErrorKind::data, "[baseline]");
  std::printf("wrote %s\n", out.c_str());
  return 0;
}

}  // namespace zt::apps
