#pragma once
// Small string helpers shared by the validators ("did you mean ...?").
#include <cstddef>
#include <string>
#include <vector>

namespace zt {

size_t edit_distance(const std::string& a, const std::string& b);  // Levenshtein

// items joined by `sep` ("a, b, c"): the lists that messages name.
std::string join(const std::vector<std::string>& items, const char* sep = ", ");

// Byte offset in JSON text where nesting first exceeds `limit` ([ and { outside strings), or
// npos: checked before parsing outside input, since walking a deep value recurses.
size_t json_depth_exceeded_at(const std::string& text, int limit);

// `s` made safe for a one-line message: control and non-ASCII bytes as \xNN, at most `max`
// bytes shown ("..." after), so a NUL or line break in outside input cannot cut or split it.
std::string printable(const std::string& s, size_t max = 64);

}  // namespace zt
