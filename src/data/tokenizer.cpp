// load_tokenizer, the tokenizer specs, and the vocabulary-file helpers the tokenizers share.
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "vocab_file.h"
#include "zt/core/atomic_file.h"
#include "zt/core/error.h"
#include "zt/core/strings.h"
#include "zt/data/tokenizer.h"

namespace zt::data {
namespace detail {

std::string read_vocab_file(const std::string& path) {
  struct stat st {};
  ZT_CHECK_AS(ErrorKind::data, ::stat(path.c_str(), &st) == 0, "[tokenizer] cannot open ", path, " (",
              std::strerror(errno), "); scripts/setup.sh fetches the tokenizer files into data/");
  ZT_CHECK_AS(ErrorKind::data, S_ISREG(st.st_mode), "[tokenizer] ", path, " is ", file_type_name(st.st_mode),
              ", not a regular file");
  std::ifstream in(path, std::ios::binary);
  ZT_CHECK_AS(ErrorKind::data, in.good(), "[tokenizer] cannot open ", path, " (", std::strerror(errno), ")");
  std::ostringstream buf;
  buf << in.rdbuf();
  ZT_CHECK_AS(ErrorKind::data, !in.bad(), "[tokenizer] cannot read ", path);
  return buf.str();
}

nlohmann::json parse_flat_json(const std::string& text, const std::string& path) {
  // Checked before parsing: walking a deeply nested value recurses.
  const size_t deep = json_depth_exceeded_at(text, 1);
  ZT_CHECK_AS(ErrorKind::data, deep == std::string::npos, "[tokenizer] ", path, ": nested JSON value at byte offset ",
              deep, " (a flat object or array was expected)");
  return parse_json(text, path, 1);
}

nlohmann::json parse_json(const std::string& text, const std::string& path, int max_depth) {
  const size_t deep = json_depth_exceeded_at(text, max_depth);
  ZT_CHECK_AS(ErrorKind::data, deep == std::string::npos, "[tokenizer] ", path, ": JSON nested deeper than ", max_depth,
              " levels at byte offset ", deep);
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    const size_t at = e.byte > 0 ? e.byte - 1 : 0;  // e.byte is 1-based
    const std::string what = e.what();              // without nlohmann's "[json.exception...] parse error at ...: "
    const size_t p = what.find(": ");
    ZT_THROW_AS(ErrorKind::data, "[tokenizer] ", path, ": invalid JSON at byte offset ", at, ": ",
                clip_entry(p == std::string::npos ? what : what.substr(p + 2)));
  } catch (const nlohmann::json::exception& e) {  // a number too large for a double
    ZT_THROW_AS(ErrorKind::data, "[tokenizer] ", path, ": invalid JSON: ", e.what());
  }
}

std::string clip_entry(const std::string& s) {
  if (s.size() <= 80) return s;
  size_t n = 80;
  while (n > 0 && (uint8_t(s[n]) & 0xC0) == 0x80) --n;  // not inside a code point
  return s.substr(0, n) + "...";
}

}  // namespace detail

void Tokenizer::check_ids(const std::vector<int32_t>& ids, const char* who) const {
  for (size_t i = 0; i < ids.size(); ++i)
    ZT_CHECK_AS(ErrorKind::data, ids[i] >= 0 && ids[i] < vocab_size(), who, " id ", ids[i], " at position ", i,
                " is outside the vocabulary [0, ", vocab_size(), ")");
}

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& kind, const std::string& dir) {
  if (kind == "gpt2") return load_gpt2_tokenizer(dir);
  if (kind == "bert") return load_bert_tokenizer(dir);
  ZT_THROW_AS(ErrorKind::invalid_argument, "[tokenizer] unknown tokenizer '", kind, "' (allowed: gpt2, bert)");
}

namespace {

namespace fs = std::filesystem;

bool is_file(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}
bool is_dir(const fs::path& p) {
  std::error_code ec;
  return fs::is_directory(p, ec);
}

TokenizerSource folder_source(const fs::path& dir) {
  const auto in = [&](const char* f) { return (dir / f).string(); };
  if (is_file(dir / "tokenizer.json")) return {"tokenizer.json", in("tokenizer.json"), {in("tokenizer.json")}};
  if (is_file(dir / "tokenizer.model")) return {"sentencepiece", in("tokenizer.model"), {in("tokenizer.model")}};
  if (is_file(dir / "encoder.json") && is_file(dir / "vocab.bpe"))
    return {"gpt2", dir.string(), {in("encoder.json"), in("vocab.bpe")}};
  if (is_file(dir / "vocab.json")) return {"bert", dir.string(), {in("vocab.json")}};
  ZT_THROW_AS(ErrorKind::data, "[tokenizer] folder ", dir.string(),
              " holds none of tokenizer.json, tokenizer.model, encoder.json + vocab.bpe (GPT-2), vocab.json (BERT)");
}

}  // namespace

TokenizerSource resolve_tokenizer_spec(const std::string& spec, const std::string& data_root) {
  if (spec == "gpt2" || spec == "bert") {
    const fs::path dir = fs::path(data_root) / spec;
    return spec == "gpt2"
               ? TokenizerSource{spec, dir.string(), {(dir / "encoder.json").string(), (dir / "vocab.bpe").string()}}
               : TokenizerSource{spec, dir.string(), {(dir / "vocab.json").string()}};
  }
  if (is_dir(spec)) return folder_source(spec);
  if (is_file(spec)) {
    if (spec.ends_with(".model")) return {"sentencepiece", spec, {spec}};
    return {"tokenizer.json", spec, {spec}};
  }
  const bool bare = spec.find('/') == std::string::npos && !spec.ends_with(".json") && !spec.ends_with(".model");
  if (bare && !spec.empty() && spec != "." && spec != ".." && is_dir(fs::path(data_root) / spec))
    return folder_source(fs::path(data_root) / spec);
  ZT_CHECK_AS(ErrorKind::invalid_argument, !bare, "[tokenizer] unknown tokenizer '", spec,
              "' (allowed: gpt2, bert, a tokenizer.json or .model file, a folder holding one, or a folder of ",
              data_root, ")");
  ZT_THROW_AS(ErrorKind::data, "[tokenizer] cannot open ", spec, ": no such file or folder");
}

std::unique_ptr<Tokenizer> load_tokenizer(const TokenizerSource& source) {
  if (source.kind == "tokenizer.json") return load_tokenizer_json(source.path);
  if (source.kind == "sentencepiece") return load_sentencepiece(source.path);
  return load_tokenizer(source.kind, source.path);
}

std::unique_ptr<Tokenizer> load_tokenizer_spec(const std::string& spec, const std::string& data_root) {
  return load_tokenizer(resolve_tokenizer_spec(spec, data_root));
}

bool is_tokenizer_spec(const std::string& spec, const std::string& data_root) {
  if (spec == "gpt2" || spec == "bert") return true;
  std::error_code ec;
  if (fs::exists(spec, ec)) return true;
  return !spec.empty() && spec.find('/') == std::string::npos && spec != "." && spec != ".." &&
         is_dir(fs::path(data_root) / spec);
}

}  // namespace zt::data
