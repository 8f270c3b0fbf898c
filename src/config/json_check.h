#pragma once
// Validation helpers for JSON sections: every key must be known, every value is checked for
// type and range, and errors name the source, the dotted key and the value found.
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "zt/config/section.h"

namespace zt::config::detail {

using config::Section;

using nlohmann::json;

// Note [hostile JSON]: nlohmann parses and destroys without recursion, but dump(), copies and
// comparisons recurse, so a value nested 50,000 levels deep overflows the stack. load() rejects
// text nested deeper than kMaxJsonDepth before parsing it, parse() rejects such a json before
// copying it, and messages quote values through short_dump (bounded in depth and length).

// The first top-level key under which `j` nests deeper than `limit` ("<top level>" for j
// itself), or "" when it does not; walks with an explicit stack.
std::string deep_key(const json& j, int limit);

// "[config] <source>: '<key>' must be <what>, got <value>"
[[noreturn]] void bad_value(const std::string& source, const std::string& key, const std::string& what,
                            const json& got);

// Integer value of `v` if it is an integer (or an integral float such as 5e8), else false.
bool as_int64(const json& v, int64_t& out);

// `dir`/config.json when `dir` is a folder holding one (a Hugging Face model folder), parsed as
// config files are (depth, duplicate keys; a JSON object); null otherwise. load.cpp.
json read_hf_config(const std::string& dir);

}  // namespace zt::config::detail
