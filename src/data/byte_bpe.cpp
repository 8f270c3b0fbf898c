// Byte-level BPE shared by GPT-2's files (gpt2_bpe.cpp) and tokenizer.json (hf_tokenizer.cpp).
#include "byte_bpe.h"

#include <unicode/normalizer2.h>
#include <unicode/unistr.h>

#include <algorithm>
#include <mutex>
#include <queue>

#include "utf8.h"
#include "zt/core/error.h"

// Note [byte-level BPE]
// A piece's UTF-8 bytes start as one-byte tokens, and adjacent symbols merge by rank. Encoder.js
// (GPT-2) works in rounds: each takes the lowest-ranked pair present and merges all its
// occurrences left to right. Hugging Face's BPE and llama3-tokenizer-js merge one pair at a time,
// the lowest rank first, then the leftmost. The two agree whenever every merge ranks after the
// merges that made its parts (as trained vocabularies do); a test-made vocabulary that breaks
// this tells them apart. Here symbols are ids and a heap ordered by (rank, position) finds the
// pairs; in rounds, a round pops every entry of its rank before pushing the pairs its merges create,
// so both orders run in O(n log n) instead of O(n^2) for one long piece.
// A piece longer than kMaxPiece bytes (one "word" of megabytes: no natural text has one) is merged
// in kMaxPiece-byte parts, each ending before a UTF-8 character's first byte, so the memory of
// one piece's merges is bounded (about 70 bytes per byte of the piece); only such pieces may get
// other ids than the references'.

namespace zt::data::detail {
namespace {

constexpr size_t kMaxCachedPiece = 64;        // longer pieces are rare: not worth caching
constexpr size_t kMaxCacheEntries = 1 << 17;  // then the cache starts over (bounded memory)
constexpr size_t kMaxPiece = 1 << 16;         // longer pieces are merged in parts of this many bytes

uint64_t pair_key(int32_t a, int32_t b) { return uint64_t(uint32_t(a)) << 32 | uint32_t(b); }

class ByteBpe final : public Tokenizer {
 public:
  ByteBpe(BpeModel model, std::vector<RegexSplit> splits, ByteBpeOptions opt)
      : model_(std::move(model)), splits_(std::move(splits)), opt_(std::move(opt)) {
    if (opt_.normal == ByteBpeOptions::Normal::none) return;
    UErrorCode st = U_ZERO_ERROR;
    using N = ByteBpeOptions::Normal;
    const bool k = opt_.normal == N::nfkc || opt_.normal == N::nfkd;
    const bool c = opt_.normal == N::nfc || opt_.normal == N::nfkc;
    norm_ = icu::Normalizer2::getInstance(nullptr, k ? "nfkc" : "nfc", c ? UNORM2_COMPOSE : UNORM2_DECOMPOSE, st);
    ZT_CHECK_AS(ErrorKind::internal, U_SUCCESS(st) && norm_, opt_.who, " ICU has no normalizer: ", u_errorName(st));
  }

  const char* name() const override { return opt_.name; }
  int32_t vocab_size() const override { return int32_t(model_.vocab().bytes.size()); }

  int32_t special(std::string_view token) const override {
    if (token.size() < 4 || token.substr(0, 2) != "<|" || token.substr(token.size() - 2) != "|>") return -1;
    return model_.id_of(token);
  }

  std::vector<int32_t> encode(std::string_view text) const override {
    utf8::check(text, opt_.who.c_str());
    std::string normal;
    if (norm_ && std::any_of(text.begin(), text.end(), [](char c) { return uint8_t(c) >= 0x80; })) {
      UErrorCode st = U_ZERO_ERROR;
      const icu::UnicodeString u = icu::UnicodeString::fromUTF8(icu::StringPiece(text.data(), int32_t(text.size())));
      norm_->normalize(u, st).toUTF8String(normal);
      ZT_CHECK_AS(ErrorKind::internal, U_SUCCESS(st), opt_.who, " normalization failed: ", u_errorName(st));
      text = normal;
    }
    std::vector<int32_t> out;
    out.reserve(text.size() / 3);
    cut(text, 0, out);
    return out;
  }

  std::string decode(const std::vector<int32_t>& ids) const override {
    check_ids(ids, opt_.who.c_str());
    std::string out;
    for (int32_t id : ids) out += model_.vocab().bytes[size_t(id)];
    return out;
  }

 private:
  // Pieces of `text` by splits_[level] onwards, each merged.
  void cut(std::string_view text, size_t level, std::vector<int32_t>& out) const {
    std::string prefixed;
    if (opt_.add_prefix_space && level == opt_.prefix_level && !text.starts_with(' ')) {
      prefixed += ' ';  // appended piecewise: GCC 12 warns (-Wrestrict) on " " + string
      prefixed += text;
      text = prefixed;
    }
    if (level == splits_.size()) return piece(text, out);
    std::vector<std::string_view> pieces;
    splits_[level].split(text, pieces);
    for (std::string_view p : pieces) cut(p, level + 1, out);
  }

  void piece(std::string_view p, std::vector<int32_t>& out) const {
    if (opt_.ignore_merges) {
      if (const int32_t id = model_.id_of(p); id >= 0) return out.push_back(id);
    }
    if (p.size() > kMaxCachedPiece) {
      for (size_t at = 0; at < p.size();) {  // Note [byte-level BPE]: long pieces in parts
        size_t len = std::min(kMaxPiece, p.size() - at);
        while (at + len < p.size() && len > 1 && (uint8_t(p[at + len]) & 0xC0) == 0x80) --len;
        model_.merge(p.substr(at, len), opt_.order, out);
        at += len;
      }
      return;
    }
    std::string key(p);
    {
      std::lock_guard<std::mutex> lock(cache_mu_);
      const auto it = cache_.find(key);
      if (it != cache_.end()) {
        out.insert(out.end(), it->second.begin(), it->second.end());
        return;
      }
    }
    const size_t first = out.size();
    model_.merge(p, opt_.order, out);
    std::lock_guard<std::mutex> lock(cache_mu_);
    if (cache_.size() >= kMaxCacheEntries) cache_.clear();
    cache_.emplace(std::move(key), std::vector<int32_t>(out.begin() + first, out.end()));
  }

  BpeModel model_;
  std::vector<RegexSplit> splits_;
  ByteBpeOptions opt_;
  const icu::Normalizer2* norm_ = nullptr;
  mutable std::mutex cache_mu_;  // encode may run on several threads
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache_;
};

}  // namespace

const std::array<char32_t, 256>& byte_chars() {
  static const std::array<char32_t, 256> cs = [] {
    std::array<char32_t, 256> c{};
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      c[b] = printable ? char32_t(b) : next++;
    }
    return c;
  }();
  return cs;
}

bool byte_level_bytes(std::string_view token, std::string& bytes, char32_t& bad) {
  static const std::array<int16_t, 324> byte_of = [] {  // the alphabet ends at U+0143
    std::array<int16_t, 324> b{};
    b.fill(-1);
    for (int x = 0; x < 256; ++x) b[byte_chars()[x]] = int16_t(x);
    return b;
  }();
  bytes.clear();
  char32_t cp = 0;
  for (size_t i = 0; i < token.size();) {
    const size_t n = utf8::decode(token, i, cp);
    if (n == 0 || cp >= byte_of.size() || byte_of[cp] < 0) {
      bad = n == 0 ? char32_t(0xFFFD) : cp;
      return false;
    }
    bytes += char(byte_of[cp]);
    i += n;
  }
  return true;
}

const std::string& gpt2_pattern() {
  static const std::string p = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
  return p;
}

BpeModel::BpeModel(BpeVocab vocab) : vocab_(std::move(vocab)) {
  vocab_.decode_only.resize(vocab_.bytes.size());
  ids_.reserve(vocab_.bytes.size());
  for (size_t id = 0; id < vocab_.bytes.size(); ++id)
    if (!vocab_.decode_only[id]) ids_.emplace(vocab_.bytes[id], int32_t(id));
  for (int b = 0; b < 256; ++b) byte_id_[b] = id_of(std::string_view(reinterpret_cast<const char*>(&b), 1));
}

int32_t BpeModel::id_of(std::string_view bytes) const {
  const auto it = ids_.find(bytes);
  return it == ids_.end() ? -1 : it->second;
}

int BpeModel::missing_byte() const {
  for (int b = 0; b < 256; ++b)
    if (byte_id_[b] < 0) return b;
  return -1;
}

void BpeModel::add_merge(int32_t left, int32_t right, int32_t merged, int32_t rank) {
  merges_[pair_key(left, right)] = Merge{rank, merged};
}

void BpeModel::merge(std::string_view piece, MergeOrder order, std::vector<int32_t>& out) const {
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
  const auto apply = [&](const Cand& c) {
    const int32_t nx = next[c.pos];
    if (id[c.pos] != c.left || nx < 0 || id[nx] != c.right) return;  // taken by an earlier merge
    id[c.pos] = c.merged;
    id[nx] = -1;
    next[c.pos] = next[nx];
    if (next[nx] >= 0) prev[next[nx]] = c.pos;
    if (prev[c.pos] >= 0) push(prev[c.pos]);
    push(c.pos);
  };
  for (int32_t i = 0; i + 1 < n; ++i) push(i);
  std::vector<Cand> round;
  while (!heap.empty()) {
    if (order == MergeOrder::one_at_a_time) {
      const Cand c = heap.top();
      heap.pop();
      apply(c);
      continue;
    }
    round.clear();
    const int32_t rank = heap.top().rank;
    while (!heap.empty() && heap.top().rank == rank) {
      round.push_back(heap.top());
      heap.pop();
    }
    for (const Cand& c : round) apply(c);  // left to right: the heap orders a rank's entries by position
  }
  for (int32_t i = 0; i >= 0 && n > 0; i = next[i]) out.push_back(id[i]);
}

std::unique_ptr<Tokenizer> make_byte_bpe(BpeModel model, std::vector<RegexSplit> splits, ByteBpeOptions opt) {
  return std::make_unique<ByteBpe>(std::move(model), std::move(splits), std::move(opt));
}

}  // namespace zt::data::detail
