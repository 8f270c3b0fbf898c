// `prepare` for language models: corpora -> train/val token shards (Note [held-out documents]).
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "output_dir.h"
#include "zt/core/atomic_file.h"
#include "zt/core/error.h"
#include "zt/core/sha256.h"
#include "zt/data/corpus.h"
#include "zt/data/prepare.h"
#include "zt/data/token_shard.h"
#include "zt/data/user_text.h"

namespace zt::data {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kWriter = "zerotrain prepare";
constexpr int64_t kProgressEvery = 25;  // documents between progress lines

struct Held {
  Document doc;
  bool val = false;
};

// The separator put before every document: GPT-2's <|endoftext|>, else BERT's [SEP], else the
// beginning of a text as Llama 3 (<|begin_of_text|>) and SentencePiece models (<s>) mark it.
int32_t separator_of(const Tokenizer& tok, std::string* name) {
  for (const char* s : {"<|endoftext|>", "[SEP]", "<|begin_of_text|>", "<s>"}) {
    if (const int32_t id = tok.special(s); id >= 0) {
      *name = s;
      return id;
    }
  }
  ZT_THROW_AS(ErrorKind::data, "[prepare] tokenizer ", tok.name(),
              " has none of <|endoftext|>, [SEP], <|begin_of_text|>, <s> to separate documents");
}

std::string megabytes(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MB", bytes / 1e6);
  return buf;
}

// A book's last val_fraction of bytes, from the first paragraph starting there, as its own
// held-out document (the part before it trains).
void split_tail(Document book, double val_fraction, std::vector<Held>& out, size_t* cut_at = nullptr) {
  const size_t cut =
      paragraph_start_at_or_after(book.text, size_t(std::ceil(double(book.text.size()) * (1.0 - val_fraction))));
  Document tail{book.name + "#val", book.text.substr(cut)};
  book.text.resize(cut);
  book.name += "#train";
  if (!book.text.empty()) out.push_back({std::move(book), false});
  if (!tail.text.empty()) out.push_back({std::move(tail), true});
  if (cut_at) *cut_at = cut;
}

// Your own text (--input), split by document (Note [held-out documents]).
std::vector<Held> user_documents(const PrepareLmOptions& opt, int64_t k, const Progress& progress) {
  std::vector<Document> docs = read_text_inputs(opt.inputs, opt.text_key, progress, opt.out);
  std::vector<Held> out;
  if (docs.size() == 1) {
    split_tail(std::move(docs[0]), opt.val_fraction, out);
    return out;
  }
  for (size_t i = 0; i < docs.size(); ++i) {
    const bool val = int64_t(i) % k == k - 1 || (int64_t(docs.size()) < k && i + 1 == docs.size());
    out.push_back({std::move(docs[i]), val});
  }
  return out;
}

// The documents in order, each marked train or validation (Note [held-out documents]).
std::vector<Held> gather_documents(const PrepareLmOptions& opt, const Progress& progress) {
  const int64_t k = std::max<int64_t>(2, std::llround(1.0 / opt.val_fraction));
  if (!opt.inputs.empty()) return user_documents(opt, k, progress);
  std::vector<Held> out;
  for (const std::string& src : opt.sources) {
    const std::string dir = (fs::path(opt.data_dir) / src).string();
    size_t bytes = 0;
    if (src == "sotu") {
      std::vector<Document> docs = read_sotu(dir);
      for (size_t i = 0; i < docs.size(); ++i) {
        bytes += docs[i].text.size();
        out.push_back({std::move(docs[i]), int64_t(i) % k == k - 1});
      }
      if (progress) progress("sotu: " + std::to_string(docs.size()) + " addresses, " + megabytes(double(bytes)));
    } else if (src == "moby-dick") {
      Document book = read_moby_dick(dir);
      bytes = book.text.size();
      size_t cut = 0;
      split_tail(std::move(book), opt.val_fraction, out, &cut);
      if (progress)
        progress("moby-dick: " + megabytes(double(bytes)) + ", the last " + megabytes(double(bytes - cut)) +
                 " held out from byte " + std::to_string(cut));
    } else {
      ZT_THROW_AS(ErrorKind::config, "[prepare] unknown source '", src, "' (known: sotu, moby-dick)");
    }
  }
  return out;
}

std::vector<uint32_t> encode_doc(const Tokenizer& tok, const Document& doc, int32_t sep) {
  std::vector<int32_t> ids;
  try {
    ids = tok.encode(doc.text);
  } catch (const Error& e) {
    ZT_THROW_AS(e.kind(), "[prepare] ", doc.name, ": ", e.what());
  }
  std::vector<uint32_t> out;
  out.reserve(ids.size() + 1);
  out.push_back(uint32_t(sep));
  for (int32_t id : ids) {
    ZT_CHECK_AS(ErrorKind::internal, 0 <= id && id < tok.vocab_size(), "[prepare] ", doc.name, ": tokenizer ",
                tok.name(), " gave id ", id, " outside its vocabulary of ", tok.vocab_size());
    out.push_back(uint32_t(id));
  }
  return out;
}

}  // namespace

PrepareLmReport prepare_lm(const PrepareLmOptions& opt, const Tokenizer& tok, const Progress& progress) {
  ZT_CHECK_AS(ErrorKind::config, opt.val_fraction > 0 && opt.val_fraction <= 0.5, "[prepare] val_fraction ",
              opt.val_fraction, " is outside (0, 0.5]");
  ZT_CHECK_AS(ErrorKind::config, !opt.sources.empty(), "[prepare] no sources (known: sotu, moby-dick)");
  ZT_CHECK_AS(ErrorKind::data, tok.vocab_size() >= 1, "[prepare] tokenizer ", tok.name(), " has no ids");
  // uint16 tokens (version 1) while they fit, as llm.c writes GPT-2's; uint32 (version 2) past that.
  const int32_t version = token_shard_version_for(tok.vocab_size());
  std::string sep_name;
  const int32_t sep = separator_of(tok, &sep_name);
  detail::OutputDir out(opt.out, kWriter, progress);  // checked before the slow part

  std::vector<Held> docs = gather_documents(opt, progress);
  PrepareLmReport rep;
  std::vector<uint32_t> split[2];  // train, val
  json inputs = json::array();
  const size_t every = std::max<size_t>(kProgressEvery, docs.size() / 20);  // about 20 lines at most
  for (size_t i = 0; i < docs.size(); ++i) {
    const Held& h = docs[i];
    const std::vector<uint32_t> ids = encode_doc(tok, h.doc, sep);
    split[h.val].insert(split[h.val].end(), ids.begin(), ids.end());
    ++(h.val ? rep.val_documents : rep.train_documents);
    if (h.val) rep.val_names.push_back(h.doc.name);
    inputs.push_back({{"document", h.doc.name},
                      {"split", h.val ? "val" : "train"},
                      {"bytes", h.doc.text.size()},
                      {"tokens", ids.size()},
                      {"sha256", sha256_hex(h.doc.text)}});
    if (progress && ((i + 1) % every == 0 || i + 1 == docs.size()))
      progress("tokenized " + std::to_string(i + 1) + "/" + std::to_string(docs.size()) + " documents (" +
               std::to_string(split[0].size() + split[1].size()) + " tokens)");
  }
  ZT_CHECK_AS(ErrorKind::data, rep.val_documents > 0, "[prepare] no document is held out for validation (", docs.size(),
              " documents, val fraction ", opt.val_fraction,
              ": every k-th document, the last of fewer than k, or a lone document's tail); add documents or "
              "raise --val-fraction");
  ZT_CHECK_AS(ErrorKind::data, rep.train_documents > 0, "[prepare] no document is left for training");
  rep.train_tokens = int64_t(split[0].size());
  rep.val_tokens = int64_t(split[1].size());

  rep.shard_version = version;
  write_token_shard(out.file("train_000000.bin"), split[0], version);
  write_token_shard(out.file("val_000000.bin"), split[1], version);
  json tok_files = json::array();
  for (const FileDigest& f : opt.tokenizer_files) tok_files.push_back({{"path", f.path}, {"sha256", f.sha256}});
  const json manifest = {
      {"writer", kWriter},
      {"task", "lm"},
      {"format", version == kTokenShardVersion
                     ? "llm.c token shards: 256 x int32 header (magic 20240520, version 1, count), uint16 tokens"
                     : "llm.c token shards: 256 x int32 header (magic 20240520, version 2, count), uint32 tokens"},
      {"tokenizer", {{"name", tok.name()}, {"vocab_size", tok.vocab_size()}, {"files", tok_files}}},
      {"separator", {{"token", sep_name}, {"id", sep}, {"where", "before every document"}}},
      {"val_fraction", opt.val_fraction},
      {"sources", opt.inputs.empty() ? json(opt.sources) : json{{"inputs", opt.inputs}, {"text_key", opt.text_key}}},
      {"shards", {{"train", {"train_000000.bin"}}, {"val", {"val_000000.bin"}}}},
      {"documents", {{"train", rep.train_documents}, {"val", rep.val_documents}}},
      {"tokens", {{"train", rep.train_tokens}, {"val", rep.val_tokens}}},
      {"inputs", inputs}};
  write_file_atomic(out.file("manifest.json"), manifest.dump(2) + "\n", ErrorKind::data, "[prepare]");
  out.commit();
  return rep;
}

}  // namespace zt::data
