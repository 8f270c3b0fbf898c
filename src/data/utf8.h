#pragma once
// UTF-8 for the tokenizers: strict decoding (no overlongs, surrogates or code points past
// U+10FFFF), so invalid input is an error that names its byte offset, never a guess.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace zt::data::utf8 {

// Length of the code point starting at s[i] (1-4) with its value in `cp`, or 0 if the bytes
// there are not valid UTF-8.
size_t decode(std::string_view s, size_t i, char32_t& cp);
// Offset of the first byte that does not start a valid code point, or npos.
size_t first_invalid(std::string_view s);
// Throws ErrorKind::data ("<who> input is not valid UTF-8: byte 0x.. at offset N") if s is not.
void check(std::string_view s, const char* who);
void append(std::string& out, char32_t cp);  // cp must be a valid scalar value

}  // namespace zt::data::utf8
