#include "regex_split.h"
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

// Note [\s as JavaScript's]
// The references the tests run (npm gpt-3-encoder's Encoder.js, llama3-tokenizer-js) match their
// patterns with JavaScript's RegExp; PCRE2 agrees with it on \p{L}, \p{N} and the rest but not on
// \s: JS's includes U+FEFF, PCRE2's (with UCP) does not. So \s is spelled out as JS's set here.
// (Hugging Face's Rust library uses Oniguruma, whose \s also has U+0085 and lacks U+FEFF: the
// two references disagree there, and on (?i) folding U+017F to s, which PCRE2 does as Oniguruma.)
// \S inside a class ([^\S]) stays PCRE2's: no class can subtract a set.

namespace zt::data::detail {
namespace {

// JS's \s: ECMAScript's WhiteSpace (with every Zs) and LineTerminator.
constexpr const char* kJsSpace =
    "\\t\\n\\x{0B}\\f\\r \\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}\\x{FEFF}";

std::string pcre2_error(int code) {
  PCRE2_UCHAR buf[256];
  pcre2_get_error_message(code, buf, sizeof buf);
  return reinterpret_cast<const char*>(buf);
}

}  // namespace

std::string js_space_pattern(const std::string& p) {
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      const char e = p[++i];
      if (e == 's') {
        out += in_class ? std::string(kJsSpace) : "[" + std::string(kJsSpace) + "]";
      } else if (e == 'S' && !in_class) {
        out += "[^" + std::string(kJsSpace) + "]";
      } else {
        out += c;
        out += e;
      }
      continue;
    }
    if (c == '[' && !in_class) {
      in_class = true;
      out += c;
      if (i + 1 < p.size() && p[i + 1] == '^') out += p[++i];
      if (i + 1 < p.size() && p[i + 1] == ']') out += p[++i];  // a leading ']' is a member
      continue;
    }
    if (c == ']' && in_class) in_class = false;
    out += c;
  }
  return out;
}

struct RegexSplit::Impl {
  pcre2_code* re = nullptr;
  std::string who;
  ErrorKind kind;
  ~Impl() { pcre2_code_free(re); }
};

RegexSplit::RegexSplit(const std::string& pattern, std::string who, ErrorKind kind) : impl_(std::make_unique<Impl>()) {
  impl_->who = std::move(who);
  impl_->kind = kind;
  const std::string pat = js_space_pattern(pattern);
  int err = 0;
  PCRE2_SIZE err_at = 0;
  impl_->re = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pat.data()), pat.size(), PCRE2_UTF | PCRE2_UCP, &err, &err_at,
                            nullptr);
  ZT_CHECK_AS(kind, impl_->re != nullptr, impl_->who, " cannot compile the pattern at offset ", err_at, ": ",
              pcre2_error(err));
  pcre2_jit_compile(impl_->re, PCRE2_JIT_COMPLETE);  // pcre2_match uses it when it succeeded, else interprets
}

RegexSplit::~RegexSplit() = default;
RegexSplit::RegexSplit(RegexSplit&&) noexcept = default;
RegexSplit& RegexSplit::operator=(RegexSplit&&) noexcept = default;

void RegexSplit::split(std::string_view text, std::vector<std::string_view>& out) const {
  std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> md(
      pcre2_match_data_create_from_pattern(impl_->re, nullptr), pcre2_match_data_free);
  ZT_CHECK_AS(ErrorKind::out_of_memory, md != nullptr, impl_->who, " cannot allocate PCRE2 match data");
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t at = 0, gap = 0;  // where the next search starts; where the unmatched text starts
  while (at < text.size()) {
    const int rc = pcre2_match(impl_->re, subject, text.size(), at, PCRE2_NO_UTF_CHECK, md.get(), nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    ZT_CHECK_AS(impl_->kind, rc > 0, impl_->who, " the pattern failed at byte offset ", at, ": ", pcre2_error(rc));
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.get());
    if (ov[1] == ov[0]) {  // an empty match: search again one character on
      at = ov[0] + 1;
      while (at < text.size() && (uint8_t(text[at]) & 0xC0) == 0x80) ++at;
      continue;
    }
    if (ov[0] > gap) out.push_back(text.substr(gap, ov[0] - gap));
    out.push_back(text.substr(ov[0], ov[1] - ov[0]));
    at = gap = ov[1];
  }
  if (gap < text.size()) out.push_back(text.substr(gap));
}

}  // namespace zt::data::detail
