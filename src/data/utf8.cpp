#include "utf8.h"

#include <cstdio>

#include "zt/core/error.h"

namespace zt::data::utf8 {

size_t decode(std::string_view s, size_t i, char32_t& cp) {
  const auto byte = [&](size_t k) { return uint8_t(s[k]); };
  const uint8_t b0 = byte(i);
  if (b0 < 0x80) {
    cp = b0;
    return 1;
  }
  // The lead byte gives the length and the allowed range of the second byte (RFC 3629 table),
  // which excludes overlongs (C0, C1, E0 80-9F, F0 80-8F), surrogates (ED A0-BF) and > U+10FFFF.
  size_t n = 0;
  uint8_t lo = 0x80, hi = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    n = 2, cp = b0 & 0x1F;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    n = 3, cp = b0 & 0x0F;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    n = 4, cp = b0 & 0x07;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (s.size() - i < n) return 0;
  for (size_t k = 1; k < n; ++k) {
    const uint8_t b = byte(i + k);
    if (b < (k == 1 ? lo : 0x80) || b > (k == 1 ? hi : 0xBF)) return 0;
    cp = (cp << 6) | (b & 0x3F);
  }
  return n;
}

size_t first_invalid(std::string_view s) {
  char32_t cp = 0;
  for (size_t i = 0; i < s.size();) {
    if (uint8_t(s[i]) < 0x80) {  // ASCII runs are most of the text
      ++i;
      continue;
    }
    const size_t n = decode(s, i, cp);
    if (n == 0) return i;
    i += n;
  }
  return std::string_view::npos;
}

void check(std::string_view s, const char* who) {
  const size_t at = first_invalid(s);
  if (at == std::string_view::npos) return;
  char hex[8];
  std::snprintf(hex, sizeof hex, "0x%02X", unsigned(uint8_t(s[at])));
  ZT_THROW_AS(ErrorKind::data, who, " input is not valid UTF-8: byte ", hex, " at offset ", at);
}

void append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += char(0xE0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xF0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3F));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  }
}

}  // namespace zt::data::utf8
