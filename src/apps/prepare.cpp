// `zerotrain prepare`: the command line over data::prepare_lm and data::prepare_sotu_party
// (zt/data/prepare.h says what they write and how documents are held out).
#include "prepare.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "zt/core/atomic_file.h"
#include "zt/core/error.h"
#include "zt/core/sha256.h"
#include "zt/data/prepare.h"
#include "zt/data/tokenizer.h"

namespace zt::apps {

namespace fs = std::filesystem;

namespace {

// The files the tokenizer reads (scripts/setup.sh fetches them), recorded with their sha256.
std::vector<data::FileDigest> tokenizer_files(const data::TokenizerSource& source) {
  std::vector<data::FileDigest> out;
  for (const std::string& p : source.files) {
    std::error_code ec;
    if (fs::exists(p, ec)) out.push_back({p, sha256_file(p)});
  }
  return out;
}

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

void progress(const std::string& line) {
  std::fprintf(stderr, "prepare: %s\n", line.c_str());
  std::fflush(stderr);
}

int run_lm(const PrepareCliOptions& o, const data::Tokenizer& tok, std::vector<data::FileDigest> files) {
  data::PrepareLmOptions opt;
  opt.data_dir = o.data_dir;
  opt.out = o.out;
  opt.sources = split_list(o.sources);
  opt.inputs = o.inputs;
  opt.text_key = o.text_key;
  opt.val_fraction = o.val_fraction;
  opt.tokenizer_files = std::move(files);
  const data::PrepareLmReport r = data::prepare_lm(opt, tok, progress);
  std::printf("tokenizer %s (%d ids), output %s\n", tok.name(), tok.vocab_size(), o.out.c_str());
  std::printf("train: %lld documents, %lld tokens -> train_000000.bin\n", (long long)r.train_documents,
              (long long)r.train_tokens);
  std::printf("val:   %lld documents, %lld tokens -> val_000000.bin\n", (long long)r.val_documents,
              (long long)r.val_tokens);
  if (r.shard_version != 1) std::printf("shards: version %d (uint32 tokens)\n", int(r.shard_version));
  std::string held;
  constexpr size_t kNamed = 12;  // thousands of JSON lines must not make a screenful
  for (size_t i = 0; i < std::min(kNamed, r.val_names.size()); ++i) held += (i ? ", " : "") + r.val_names[i];
  if (r.val_names.size() > kNamed) held += ", and " + std::to_string(r.val_names.size() - kNamed) + " more";
  std::printf("held out: %s\n", held.c_str());
  return 0;
}

int run_cls(const PrepareCliOptions& o, const data::Tokenizer& tok, std::vector<data::FileDigest> files) {
  data::PrepareClsOptions opt;
  opt.data_dir = o.data_dir;
  opt.out = o.out;
  opt.max_len = o.max_len;
  opt.tokenizer_files = std::move(files);
  const data::PrepareClsReport r = data::prepare_sotu_party(opt, tok, progress);
  auto counts = [&](const std::vector<int64_t>& c) {
    std::string s;
    long long total = 0;
    for (size_t k = 0; k < c.size(); ++k) {
      s += (k ? ", " : "") + std::to_string(c[k]) + " " + r.class_names[k];
      total += c[k];
    }
    return std::to_string(total) + " passages (" + s + ")";
  };
  std::printf("tokenizer %s (%d ids), max_len %d, output %s\n", tok.name(), tok.vocab_size(), o.max_len, o.out.c_str());
  std::printf("train: %s from %lld addresses -> train.bin\n", counts(r.train_counts).c_str(),
              (long long)r.train_addresses);
  std::printf("test:  %s from %lld addresses -> test.bin\n", counts(r.test_counts).c_str(),
              (long long)r.test_addresses);
  std::printf("dropped %lld addresses of other parties; %lld passages cut to %d tokens\n",
              (long long)r.dropped_addresses, (long long)r.truncated, o.max_len);
  std::printf("majority class (train): %s; always answering it scores %.4f on test\n",
              r.class_names[size_t(r.majority_class)].c_str(), r.majority_test_accuracy);
  return 0;
}

}  // namespace

void add_prepare_command(CLI::App& app, PrepareCliOptions& o) {
  CLI::App* p = app.add_subcommand("prepare", "Tokenize the text corpora into token shards or labelled passages");
  p->add_option("--task", o.task, "lm: train/val token shards; sotu-party: Democratic vs Republican passages")
      ->check(CLI::IsMember({"lm", "sotu-party"}))
      ->type_name("lm|sotu-party");
  p->add_option(
       "--tokenizer", o.tokenizer,
       "gpt2, bert, a tokenizer.json, a SentencePiece .model, or a folder holding one (or named in --data-dir)")
      ->required()
      ->type_name("gpt2|bert|FILE|DIR");
  p->add_option("--out", o.out, "the output folder (replaced whole when the run succeeds)")
      ->required()
      ->type_name("DIR");
  p->add_option("--data-dir", o.data_dir, "holds sotu/, moby-dick/ and the tokenizer folders (default data)")
      ->type_name("DIR");
  CLI::Option* tok_dir =
      p->add_option("--tokenizer-dir", o.tokenizer_dir, "gpt2's or bert's files (default <data-dir>/<tokenizer>)")
          ->type_name("DIR");
  CLI::Option* sources =
      p->add_option("--sources", o.sources, "lm: corpora, in order (default sotu,moby-dick)")->type_name("LIST");
  CLI::Option* input =
      p->add_option("--input", o.inputs,
                    "lm: your own text instead of --sources: plain-text files, folders of them, *.jsonl (one "
                    "document per line)")
          ->type_name("PATH...")
          ->excludes(sources);
  CLI::Option* key =
      p->add_option("--text-key", o.text_key, "lm: the field of a *.jsonl line that holds its text (default text)")
          ->type_name("KEY")
          ->needs(input);
  CLI::Option* val = p->add_option("--val-fraction", o.val_fraction, "lm: share held out (default 0.05)")
                         ->type_name("F")
                         ->check(CLI::Validator(
                             [](std::string& s) -> std::string {
                               double v = 0;
                               return CLI::detail::lexical_cast(s, v) && v > 0 && v <= 0.5
                                          ? ""
                                          : "'" + s + "' is not a number in (0, 0.5]";
                             },
                             ""));
  CLI::Option* max_len = p->add_option("--max-len", o.max_len, "sotu-party: tokens per passage with [CLS] and [SEP]")
                             ->type_name("N")
                             ->check(CLI::Range(8, 512));
  p->callback([&o, sources, val, max_len, input, key, tok_dir] {
    // Here, not as a check on the option: a bare name is looked up in --data-dir.
    if (!data::is_tokenizer_spec(o.tokenizer, o.data_dir))
      throw CLI::ValidationError("--tokenizer", o.tokenizer +
                                                    " not in {gpt2,bert} and not a tokenizer.json, .model "
                                                    "or tokenizer folder (nor one in " +
                                                    o.data_dir + ")");
    const bool named = o.tokenizer == "gpt2" || o.tokenizer == "bert";
    if (tok_dir->count() && !named)
      throw CLI::ValidationError("--tokenizer-dir", "is for --tokenizer gpt2 or bert (give the file or folder itself)");
    if (o.task == "lm" && max_len->count()) throw CLI::ValidationError("--max-len", "is for --task sotu-party");
    for (CLI::Option* lm_only : {sources, val, input, key})
      if (o.task != "lm" && lm_only->count()) throw CLI::ValidationError(lm_only->get_name(), "is for --task lm");
  });
}

int run_prepare(const PrepareCliOptions& o) {
  if (o.tokenizer != "gpt2" && o.tokenizer != "bert") {
    const data::TokenizerSource source = data::resolve_tokenizer_spec(o.tokenizer, o.data_dir);
    const std::unique_ptr<data::Tokenizer> tok = data::load_tokenizer(source);
    return o.task == "lm" ? run_lm(o, *tok, tokenizer_files(source)) : run_cls(o, *tok, tokenizer_files(source));
  }
  const std::string dir = o.tokenizer_dir.empty() ? (fs::path(o.data_dir) / o.tokenizer).string() : o.tokenizer_dir;
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) {
    const int err = errno;  // "not found" only when it is not there
    ZT_CHECK_AS(ErrorKind::data, err != ENOENT, "[prepare] tokenizer folder ", dir,
                " not found (scripts/setup.sh fetches it into data/; or give --tokenizer-dir)");
    ZT_THROW_AS(ErrorKind::data, "[prepare] cannot read the tokenizer folder ", dir, ": ", std::strerror(err));
  }
  ZT_CHECK_AS(ErrorKind::data, S_ISDIR(st.st_mode), "[prepare] tokenizer folder ", dir, " is ",
              S_ISREG(st.st_mode) ? "a file" : file_type_name(st.st_mode), ", not a folder");
  data::TokenizerSource source = data::resolve_tokenizer_spec(o.tokenizer, o.data_dir);
  source.path = dir;  // --tokenizer-dir's, or the default
  for (std::string& f : source.files) f = (fs::path(dir) / fs::path(f).filename()).string();
  std::vector<data::FileDigest> files = tokenizer_files(source);
  const std::unique_ptr<data::Tokenizer> tok = data::load_tokenizer(source);
  return o.task == "lm" ? run_lm(o, *tok, std::move(files)) : run_cls(o, *tok, std::move(files));
}

}  // namespace zt::apps
