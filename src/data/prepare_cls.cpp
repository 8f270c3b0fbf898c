// `prepare --task sotu-party`: SOTU passages labelled by party (Note [sotu-party split]).
#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "output_dir.h"
#include "zt/core/atomic_file.h"
#include "zt/core/error.h"
#include "zt/core/sha256.h"
#include "zt/data/corpus.h"
#include "zt/data/prepare.h"
#include "zt/data/seq_cls.h"

namespace zt::data {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kWriter = "zerotrain prepare";
constexpr int kMinWords = 20;
const std::vector<std::string> kPartyCodes = {"d", "r"};  // label = index
const std::vector<std::string> kClassNames = {"Democratic", "Republican"};

int32_t need_special(const Tokenizer& tok, const char* token) {
  const int32_t id = tok.special(token);
  ZT_CHECK_AS(ErrorKind::config, id >= 0, "[prepare] sotu-party needs ", token, ", which tokenizer ", tok.name(),
              " lacks (use --tokenizer bert)");
  return id;
}

}  // namespace

PrepareClsReport prepare_sotu_party(const PrepareClsOptions& opt, const Tokenizer& tok, const Progress& progress) {
  ZT_CHECK_AS(ErrorKind::config, opt.max_len >= 8 && opt.max_len <= 512, "[prepare] max_len ", opt.max_len,
              " is outside 8..512");
  ZT_CHECK_AS(ErrorKind::config, opt.test_year_multiple >= 2, "[prepare] test_year_multiple must be >= 2, got ",
              opt.test_year_multiple);
  ZT_CHECK_AS(ErrorKind::data, tok.vocab_size() >= 1 && tok.vocab_size() <= 65536, "[prepare] tokenizer ", tok.name(),
              " has ", tok.vocab_size(), " ids; records hold uint16 tokens (at most 65536)");
  const int32_t cls = need_special(tok, "[CLS]"), sep = need_special(tok, "[SEP]");
  ZT_CHECK_AS(ErrorKind::config, need_special(tok, "[PAD]") == 0, "[prepare] tokenizer ", tok.name(),
              " has [PAD] = ", tok.special("[PAD]"), "; batches pad with 0");
  detail::OutputDir out(opt.out, kWriter, progress);

  const std::vector<Document> docs = read_sotu((fs::path(opt.data_dir) / "sotu").string());
  const int max_words = std::max(kMinWords, (opt.max_len - 2) * 2 / 3);
  const int32_t classes = int32_t(kClassNames.size());
  SeqClsSet split[2] = {{classes, opt.max_len, tok.vocab_size()}, {classes, opt.max_len, tok.vocab_size()}};
  PrepareClsReport rep;
  rep.class_names = kClassNames;
  json inputs = json::array();
  for (size_t i = 0; i < docs.size(); ++i) {
    const Document& d = docs[i];
    const SotuAddress a = parse_sotu_name(fs::path(d.name).filename().string());
    const auto code = std::find(kPartyCodes.begin(), kPartyCodes.end(), a.party);
    json in = {{"document", d.name}, {"sha256", sha256_hex(d.text)}, {"party", a.party}};
    if (code == kPartyCodes.end()) {
      ++rep.dropped_addresses;
      inputs.push_back(in);
      continue;
    }
    const int32_t label = int32_t(code - kPartyCodes.begin());
    const bool test = a.year % opt.test_year_multiple == 0;
    ++(test ? rep.test_addresses : rep.train_addresses);
    int64_t records = 0;
    for (const std::string& passage : split_passages(d.text, max_words, kMinWords)) {
      std::vector<int32_t> ids;
      try {
        ids = tok.encode(passage);
      } catch (const Error& e) {
        ZT_THROW_AS(e.kind(), "[prepare] ", d.name, ": ", e.what());
      }
      if (ids.empty()) continue;
      if (int64_t(ids.size()) > opt.max_len - 2) {
        ids.resize(size_t(opt.max_len - 2));
        ++rep.truncated;
      }
      ids.insert(ids.begin(), cls);
      ids.push_back(sep);
      split[test].add(label, ids);
      ++records;
    }
    in["split"] = test ? "test" : "train";
    in["records"] = records;
    inputs.push_back(in);
    if (progress && ((i + 1) % 25 == 0 || i + 1 == docs.size()))
      progress("tokenized " + std::to_string(i + 1) + "/" + std::to_string(docs.size()) + " addresses (" +
               std::to_string(split[0].size() + split[1].size()) + " passages)");
  }
  ZT_CHECK_AS(ErrorKind::data, split[0].size() > 0 && split[1].size() > 0, "[prepare] sotu-party: the train split has ",
              split[0].size(), " passages and the test split ", split[1].size(),
              "; both need some (addresses of years divisible by ", opt.test_year_multiple, " are the test split)");
  rep.train_counts = split[0].class_counts();
  rep.test_counts = split[1].class_counts();
  rep.majority_class =
      int32_t(std::max_element(rep.train_counts.begin(), rep.train_counts.end()) - rep.train_counts.begin());
  rep.majority_test_accuracy = double(rep.test_counts[size_t(rep.majority_class)]) / double(split[1].size());

  write_seq_cls(out.file("train.bin"), split[0]);
  write_seq_cls(out.file("test.bin"), split[1]);
  json tok_files = json::array();
  for (const FileDigest& f : opt.tokenizer_files) tok_files.push_back({{"path", f.path}, {"sha256", f.sha256}});
  const json manifest = {
      {"writer", kWriter},
      {"task", "sotu-party"},
      {"format", "zerotrain seq-cls records (src/data/include/zt/data/seq_cls.h, Note [seq-cls format])"},
      {"tokenizer", {{"name", tok.name()}, {"vocab_size", tok.vocab_size()}, {"files", tok_files}}},
      {"max_len", opt.max_len},
      {"passage_words", {{"min", kMinWords}, {"max", max_words}}},
      {"classes", kClassNames},
      {"party_codes", kPartyCodes},
      {"test_split", "addresses whose year is a multiple of " + std::to_string(opt.test_year_multiple)},
      {"files", {{"train", "train.bin"}, {"test", "test.bin"}}},
      {"records", {{"train", split[0].size()}, {"test", split[1].size()}}},
      {"class_counts", {{"train", rep.train_counts}, {"test", rep.test_counts}}},
      {"addresses", {{"train", rep.train_addresses}, {"test", rep.test_addresses}, {"dropped", rep.dropped_addresses}}},
      {"truncated_records", rep.truncated},
      {"majority_class", {{"label", rep.majority_class}, {"test_accuracy", rep.majority_test_accuracy}}},
      {"inputs", inputs}};
  write_file_atomic(out.file("manifest.json"), manifest.dump(2) + "\n", ErrorKind::data, "[prepare]");
  out.commit();
  return rep;
}

}  // namespace zt::data
