#pragma once
// Small string helpers shared by the validators ("did you mean ...?").
#include <cstddef>
#include <string>

namespace zt {

size_t edit_distance(const std::string& a, const std::string& b);  // Levenshtein

}  // namespace zt
