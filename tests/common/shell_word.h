#pragma once
// Paths the tests put into shell commands (the binary, the source folder) as one shell word each,
// so the suite passes wherever the clone lives: a folder whose name has spaces, quotes or other
// characters a shell would split or expand.
#include <string>

namespace zt::testing {

inline std::string shell_word(const std::string& path) {
  bool plain = !path.empty();
  for (char c : path)
    plain = plain && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '/' || c == '.' || c == '_' || c == '-' || c == '+' || c == ':' || c == ',');
  if (plain) return path;
  std::string q = "'";
  for (char c : path) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

}  // namespace zt::testing
