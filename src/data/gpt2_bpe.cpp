// GPT-2's byte-level BPE, giving the ids of npm gpt-3-encoder@1.1.4's Encoder.js (Note [GPT-2 as
// Encoder.js does it]).
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <array>
#include <mutex>
#include <queue>
#include <unordered_map>

#include "utf8.h"
#include "vocab_file.h"
#include "zt/core/error.h"
#include "zt/data/tokenizer.h"

// Note [GPT-2 as Encoder.js does it]
// Encoder.js (OpenAI's encoder.py in JS) splits the text with the pattern below, maps each
// piece's UTF-8 bytes to printable characters (bytes_to_unicode), and merges adjacent symbols:
// each round takes the lowest-ranked pair present and merges all its occurrences left to right.
// Here symbols are ids and a heap ordered by (rank, position) finds the pairs; a round pops
// every entry of the lowest rank before pushing the pairs its merges create, so the rounds
// are exactly Encoder.js's, in O(n log n) instead of O(n^2) for one long piece. Encoder.js
// looks ranks up by the string "first,second"; GPT-2's vocab.bpe has no two pairs with the
// same such string, so looking up the pair itself gives the same ranks.
// A piece longer than kMaxPiece bytes (one "word" of megabytes: no natural text has one) is merged
// in kMaxPiece-byte parts, each ending before a UTF-8 character's first byte, so the memory of
// one piece's merges is bounded (about 70 bytes per byte of the piece); only such pieces may get
// other ids than Encoder.js's.
// The pattern is run by PCRE2 with UTF and UCP. Only \s differs between the engines: JS's
// includes U+FEFF, PCRE2's does not, so \s is spelled out as JS's set.

namespace zt::data {
namespace {

constexpr const char* kWho = "[tokenizer] gpt2:";
constexpr size_t kMaxCachedPiece = 64;        // longer pieces are rare: not worth caching
constexpr size_t kMaxCacheEntries = 1 << 17;  // then the cache starts over (bounded memory)
constexpr size_t kMaxPiece = 1 << 16;         // longer pieces are merged in parts of this many bytes

// JS's \s: ECMAScript's WhiteSpace (with every Zs) and LineTerminator.
constexpr const char* kJsSpace =
    "\\t\\n\\x{0B}\\f\\r \\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}\\x{FEFF}";

std::string gpt2_pattern() {
  const std::string s = kJsSpace;
  // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  return "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" + s + "\\p{L}\\p{N}]+|[" + s + "]+(?![^" + s + "])|[" + s +
         "]+";
}

// bytes_to_unicode: printable bytes stand for themselves, the other 68 for U+0100 onwards.
std::array<char32_t, 256> byte_chars() {
  std::array<char32_t, 256> cs{};
  char32_t next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    cs[b] = printable ? char32_t(b) : next++;
  }
  return cs;
}

uint64_t pair_key(int32_t a, int32_t b) { return uint64_t(uint32_t(a)) << 32 | uint32_t(b); }

class Gpt2Bpe final : public Tokenizer {
 public:
  explicit Gpt2Bpe(const std::string& dir) {
    load_encoder(dir + "/encoder.json");
    load_merges(dir + "/vocab.bpe");
    compile_pattern();
  }
  ~Gpt2Bpe() override { pcre2_code_free(re_); }
  Gpt2Bpe(const Gpt2Bpe&) = delete;
  Gpt2Bpe& operator=(const Gpt2Bpe&) = delete;

  const char* name() const override { return "gpt2"; }
  int32_t vocab_size() const override { return int32_t(bytes_of_.size()); }

  int32_t special(std::string_view token) const override {
    if (token.size() < 4 || token.substr(0, 2) != "<|" || token.substr(token.size() - 2) != "|>") return -1;
    const auto it = encoder_.find(std::string(token));
    return it == encoder_.end() ? -1 : it->second;
  }

  std::vector<int32_t> encode(std::string_view text) const override {
    utf8::check(text, kWho);
    std::vector<int32_t> out;
    out.reserve(text.size() / 3);
    std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> md(
        pcre2_match_data_create_from_pattern(re_, nullptr), pcre2_match_data_free);
    ZT_CHECK_AS(ErrorKind::out_of_memory, md != nullptr, kWho, " cannot allocate PCRE2 match data");
    const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
    size_t at = 0;
    while (at < text.size()) {
      const int rc = pcre2_match(re_, subject, text.size(), at, PCRE2_NO_UTF_CHECK, md.get(), nullptr);
      if (rc == PCRE2_ERROR_NOMATCH) break;
      ZT_CHECK_AS(ErrorKind::internal, rc > 0, kWho, " the pre-tokenizer failed at byte offset ", at, ": ",
                  pcre2_error(rc));
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.get());
      ZT_CHECK_AS(ErrorKind::internal, ov[1] > ov[0], kWho, " the pre-tokenizer matched nothing at byte offset ",
                  ov[0]);
      bpe_cached(text.substr(ov[0], ov[1] - ov[0]), out);
      at = ov[1];
    }
    return out;
  }

  std::string decode(const std::vector<int32_t>& ids) const override {
    check_ids(ids, kWho);
    std::string out;
    for (int32_t id : ids) out += bytes_of_[size_t(id)];
    return out;
  }

 private:
  struct Merge {
    int32_t rank, id;  // id: the merged token's
  };

  static std::string pcre2_error(int code) {
    PCRE2_UCHAR buf[256];
    pcre2_get_error_message(code, buf, sizeof buf);
    return reinterpret_cast<const char*>(buf);
  }

  // encoder.json: {"byte-level token": id}, ids 0..n-1 each once.
  void load_encoder(const std::string& path) {
    const nlohmann::json j = detail::parse_flat_json(detail::read_vocab_file(path), path);
    ZT_CHECK_AS(ErrorKind::data, j.is_object() && !j.empty(), "[tokenizer] ", path,
                ": expected a non-empty JSON object of token -> id");
    const std::array<char32_t, 256> chars = byte_chars();
    std::unordered_map<char32_t, char> byte_of;
    for (int b = 0; b < 256; ++b) byte_of[chars[b]] = char(b);

    const size_t n = j.size();
    bytes_of_.assign(n, {});
    std::vector<bool> seen(n);
    encoder_.reserve(n);
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
      std::string& bytes = bytes_of_[id];
      char32_t cp = 0;
      for (size_t i = 0; i < key.size();) {  // nlohmann checked the UTF-8
        i += utf8::decode(key, i, cp);
        const auto it = byte_of.find(cp);
        ZT_CHECK_AS(ErrorKind::data, it != byte_of.end(), "[tokenizer] ", path, ": ", entry, " (id ", id,
                    ") has a character outside GPT-2's byte alphabet (U+", std::hex, uint32_t(cp), ")");
        bytes += it->second;
      }
      encoder_.emplace(key, int32_t(id));
    }
    for (int b = 0; b < 256; ++b) {
      std::string c;
      utf8::append(c, chars[b]);
      const auto it = encoder_.find(c);
      ZT_CHECK_AS(ErrorKind::data, it != encoder_.end(), "[tokenizer] ", path, ": no entry \"", c, "\" for byte ", b,
                  " (every byte needs one)");
      byte_id_[b] = it->second;
    }
  }

  // vocab.bpe: a version line, then "first second" per line by rank. As Encoder.js does, the
  // first and the last line (empty after the final newline) are not merges.
  void load_merges(const std::string& path) {
    const std::string text = detail::read_vocab_file(path);
    std::vector<std::string_view> lines;
    for (size_t start = 0;;) {
      const size_t end = text.find('\n', start);
      lines.push_back(std::string_view(text).substr(start, end == std::string::npos ? end : end - start));
      if (end == std::string::npos) break;
      start = end + 1;
    }
    merges_.reserve(lines.size());
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
      const int32_t a = token_id(parts[0], path, i), b = token_id(parts[1], path, i);
      const int32_t merged = token_id(parts[0] + parts[1], path, i);
      merges_[pair_key(a, b)] = Merge{int32_t(i - 1), merged};  // a repeated pair keeps its last rank
    }
  }

  int32_t token_id(const std::string& token, const std::string& path, size_t line) const {
    const auto it = encoder_.find(token);
    ZT_CHECK_AS(ErrorKind::data, it != encoder_.end(), "[tokenizer] ", path, " line ", line + 1, ": \"",
                detail::clip_entry(token), "\" is not in encoder.json");
    return it->second;
  }

  void compile_pattern() {
    const std::string pat = gpt2_pattern();
    int err = 0;
    PCRE2_SIZE err_at = 0;
    re_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pat.c_str()), pat.size(), PCRE2_UTF | PCRE2_UCP, &err, &err_at,
                        nullptr);
    ZT_CHECK_AS(ErrorKind::internal, re_ != nullptr, kWho, " cannot compile the pre-tokenizer pattern at offset ",
                err_at, ": ", pcre2_error(err));
    pcre2_jit_compile(re_, PCRE2_JIT_COMPLETE);  // pcre2_match uses it when it succeeded, else interprets
  }

  void bpe_cached(std::string_view piece, std::vector<int32_t>& out) const {
    if (piece.size() > kMaxCachedPiece) {
      for (size_t at = 0; at < piece.size();) {  // Note [GPT-2 as Encoder.js does it]: long pieces in parts
        size_t len = std::min(kMaxPiece, piece.size() - at);
        while (at + len < piece.size() && len > 1 && (uint8_t(piece[at + len]) & 0xC0) == 0x80) --len;
        bpe(piece.substr(at, len), out);
        at += len;
      }
      return;
    }
    std::string key(piece);
    {
      std::lock_guard<std::mutex> lock(cache_mu_);
      const auto it = cache_.find(key);
      if (it != cache_.end()) {
        out.insert(out.end(), it->second.begin(), it->second.end());
        return;
      }
    }
    const size_t first = out.size();
    bpe(piece, out);
    std::lock_guard<std::mutex> lock(cache_mu_);
    if (cache_.size() >= kMaxCacheEntries) cache_.clear();
    cache_.emplace(std::move(key), std::vector<int32_t>(out.begin() + first, out.end()));
  }

  // Appends the ids of one pre-tokenized piece (Note [GPT-2 as Encoder.js does it]).
  void bpe(std::string_view piece, std::vector<int32_t>& out) const {
    const int32_t n = int32_t(piece.size());
    std::vector<int32_t> id(n), prev(n), next(n);  // a linked list of symbols; a merge keeps the left one
    for (int32_t i = 0; i < n; ++i) {
      id[i] = byte_id_[uint8_t(piece[i])];
      prev[i] = i - 1;
      next[i] = i + 1 < n ? i + 1 : -1;
    }
    struct Cand {
      int32_t rank, pos, left, right, merged;
      bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
    };
    std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> heap;
    const auto push = [&](int32_t pos) {
      const int32_t nx = next[pos];
      if (nx < 0) return;
      const auto it = merges_.find(pair_key(id[pos], id[nx]));
      if (it != merges_.end()) heap.push(Cand{it->second.rank, pos, id[pos], id[nx], it->second.id});
    };
    for (int32_t i = 0; i + 1 < n; ++i) push(i);
    std::vector<Cand> round;
    while (!heap.empty()) {
      round.clear();
      const int32_t rank = heap.top().rank;
      while (!heap.empty() && heap.top().rank == rank) {
        round.push_back(heap.top());
        heap.pop();
      }
      for (const Cand& c : round) {  // left to right: the heap orders a rank's entries by position
        const int32_t nx = next[c.pos];
        if (id[c.pos] != c.left || nx < 0 || id[nx] != c.right) continue;  // taken by an earlier merge
        id[c.pos] = c.merged;
        id[nx] = -1;
        next[c.pos] = next[nx];
        if (next[nx] >= 0) prev[next[nx]] = c.pos;
        if (prev[c.pos] >= 0) push(prev[c.pos]);
        push(c.pos);
      }
    }
    for (int32_t i = 0; i >= 0 && n > 0; i = next[i]) out.push_back(id[i]);
  }

  std::unordered_map<std::string, int32_t> encoder_;  // byte-level token -> id
  std::vector<std::string> bytes_of_;                 // id -> the raw bytes it stands for
  std::array<int32_t, 256> byte_id_{};                // byte -> id of its one-character token
  std::unordered_map<uint64_t, Merge> merges_;        // (left id, right id) -> rank and merged id
  pcre2_code* re_ = nullptr;
  mutable std::mutex cache_mu_;  // encode may run on several threads
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache_;
};

}  // namespace

std::unique_ptr<Tokenizer> load_gpt2_tokenizer(const std::string& dir) { return std::make_unique<Gpt2Bpe>(dir); }

}  // namespace zt::data
