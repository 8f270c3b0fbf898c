#include "json_check.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "zt/config/config.h"
#include "zt/core/error.h"
#include "zt/core/strings.h"

namespace zt::config {
namespace {

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string fmt_double(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

}  // namespace

std::string nearest(const std::string& key, const std::vector<std::string>& candidates) {
  const std::string k = lower(key);
  const size_t limit = std::max<size_t>(2, k.size() / 3);
  std::string best;
  size_t best_d = limit + 1;
  for (const auto& c : candidates) {
    size_t d = edit_distance(k, lower(c));
    if (d < best_d) best_d = d, best = c;  // first of equals wins
  }
  return best;
}

namespace detail {

namespace {
constexpr int kDumpDepth = 4;                              // deeper lists and objects print as [...] and {...}
constexpr auto kReplace = json::error_handler_t::replace;  // invalid UTF-8 prints, never throws

void dump_into(const json& v, std::string& out, size_t max_chars, int depth) {
  if (v.is_string()) {  // only the part that can be shown is escaped
    const auto& s = v.get_ref<const std::string&>();
    out += json(s.substr(0, max_chars + 1)).dump(-1, ' ', false, kReplace);
    return;
  }
  if (!v.is_structured()) {
    out += v.dump(-1, ' ', false, kReplace);
    return;
  }
  const bool obj = v.is_object();
  if (depth >= kDumpDepth && !v.empty()) {
    out += obj ? "{...}" : "[...]";
    return;
  }
  out += obj ? '{' : '[';
  for (auto it = v.begin(); it != v.end() && out.size() <= max_chars; ++it) {
    if (it != v.begin()) out += ',';
    if (obj) out += json(it.key()).dump(-1, ' ', false, kReplace) + ':';
    dump_into(*it, out, max_chars, depth + 1);
  }
  out += obj ? '}' : ']';
}
}  // namespace

std::string clip(const std::string& s, size_t max_chars) {
  if (s.size() <= max_chars) return s;
  return s.substr(0, max_chars) + "... (" + std::to_string(s.size()) + " bytes)";
}

std::string short_dump(const json& v, size_t max_chars) {
  std::string out;
  dump_into(v, out, max_chars, 0);
  return out.size() <= max_chars ? out : out.substr(0, max_chars) + "...";
}

std::string deep_key(const json& j, int limit) {
  struct Item {
    const json* v;
    int depth;
    std::string key;
  };
  if (!j.is_structured()) return "";
  std::vector<Item> stack{{&j, 1, "<top level>"}};
  while (!stack.empty()) {
    Item item = std::move(stack.back());
    stack.pop_back();
    if (item.depth > limit) return clip(item.key);
    for (auto it = item.v->begin(); it != item.v->end(); ++it) {
      if (!it->is_structured()) continue;
      const bool top = item.depth == 1 && j.is_object();
      stack.push_back({&*it, item.depth + 1, top ? it.key() : item.key});
    }
  }
  return "";
}

void bad_value(const std::string& source, const std::string& key, const std::string& what, const json& got) {
  ZT_THROW_AS(ErrorKind::config, "[config] ", source, ": '", key, "' must be ", what, ", got ", short_dump(got));
}


bool as_int64(const json& v, int64_t& out) {
  if (v.is_number_integer()) {
    if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max())) return false;
    out = v.get<int64_t>();
    return true;
  }
  if (v.is_number_float()) {  // DeepSpeed configs often write sizes as 5e8
    double d = v.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.2e18) {
      out = int64_t(d);
      return true;
    }
  }
  return false;
}

}  // namespace detail

// ---- Section ----
using detail::bad_value;
using detail::as_int64;
using detail::clip;
using detail::short_dump;
using nlohmann::json;

Section::Section(const json& j, std::string prefix, const std::string& source)
    : j_(j), prefix_(std::move(prefix)), source_(source) {
  if (!j_.is_object()) bad_value(source_, prefix_.empty() ? "<top level>" : prefix_, "an object", j_);
}

void Section::allow(const std::vector<std::string>& known, const std::string& whose) const {
  for (const auto& item : j_.items()) {
    if (std::find(known.begin(), known.end(), item.key()) != known.end()) continue;
    const std::string key = clip(item.key());
    std::string near = nearest(key, known);
    if (!near.empty())
      ZT_THROW_AS(ErrorKind::config, "[config] ", source_, ": unknown key '", path(key), "' (did you mean '",
                  path(near), "'?)");
    ZT_THROW_AS(ErrorKind::config, "[config] ", source_, ": unknown key '", path(key), "' (allowed",
                prefix_.empty() ? "" : " in '" + prefix_ + "'", whose.empty() ? "" : " for " + whose, ": ", join(known),
                ")");
  }
}

void Section::read_int(const std::string& key, int64_t& out, int64_t lo, int64_t hi) const {
  if (!has(key)) return;
  std::string what = hi != std::numeric_limits<int64_t>::max()
                         ? "an integer in " + std::to_string(lo) + ".." + std::to_string(hi)
                     : lo == 1 ? "a positive integer"
                     : lo == 0 ? "a non-negative integer"
                               : "an integer >= " + std::to_string(lo);
  int64_t v = 0;
  if (!as_int64(j_.at(key), v) || v < lo || v > hi) bad_value(source_, path(key), what, j_.at(key));
  out = v;
}

void Section::read_int(const std::string& key, int& out, int lo, int hi) const {
  int64_t v = out;
  read_int(key, v, lo, hi == std::numeric_limits<int>::max() ? std::numeric_limits<int64_t>::max() : hi);
  if (v > std::numeric_limits<int>::max()) bad_value(source_, path(key), "an integer that fits in 32 bits", j_.at(key));
  out = int(v);
}

void Section::read_u64(const std::string& key, uint64_t& out) const {
  if (!has(key)) return;
  const json& v = j_.at(key);
  if (v.is_number_unsigned()) {
    out = v.get<uint64_t>();
    return;
  }
  int64_t i = 0;
  if (!as_int64(v, i) || i < 0) bad_value(source_, path(key), "a non-negative integer", v);
  out = uint64_t(i);
}

void Section::read_number(const std::string& key, double& out, double lo, bool lo_open, double hi, bool hi_open) const {
  if (!has(key)) return;
  std::string what;
  if (std::isinf(hi))
    what = lo == 0 ? (lo_open ? "a positive number" : "a non-negative number")
                   : std::string("a number ") + (lo_open ? "> " : ">= ") + fmt_double(lo);
  else
    what = std::string("a number in ") + (lo_open ? "(" : "[") + fmt_double(lo) + ", " + fmt_double(hi) +
           (hi_open ? ")" : "]");
  const json& v = j_.at(key);
  if (!v.is_number()) bad_value(source_, path(key), what, v);
  double d = v.get<double>();
  bool ok = std::isfinite(d) && (lo_open ? d > lo : d >= lo) && (hi_open ? d < hi : d <= hi);
  if (!ok) bad_value(source_, path(key), what, v);
  out = d;
}

void Section::read_bool(const std::string& key, bool& out) const {
  if (!has(key)) return;
  if (!j_.at(key).is_boolean()) bad_value(source_, path(key), "true or false", j_.at(key));
  out = j_.at(key).get<bool>();
}

void Section::read_string(const std::string& key, std::string& out, bool allow_empty) const {
  if (!has(key)) return;
  const json& v = j_.at(key);
  if (!v.is_string() || (!allow_empty && v.get<std::string>().empty()))
    bad_value(source_, path(key), allow_empty ? "a string" : "a non-empty string", v);
  out = v.get<std::string>();
}

void Section::read_path(const std::string& key, std::string& out, bool allow_empty) const {
  read_string(key, out, allow_empty);
  for (size_t i = 0; i < out.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(out[i]);
    if (c >= 0x20 && c != 0x7f) continue;
    char code[8];
    std::snprintf(code, sizeof code, "0x%02x", c);
    ZT_THROW_AS(ErrorKind::config, "[config] ", source_, ": '", path(key), "' is a path and cannot hold control characters; ",
                "byte ", i, " is ", code, " in ", short_dump(j_.at(key)));
  }
}

void Section::read_choice(const std::string& key, std::string& out, const std::vector<std::string>& allowed,
                          bool case_insensitive) const {
  if (!has(key)) return;
  const json& v = j_.at(key);
  std::string what = "one of " + join(allowed) + (case_insensitive ? " (any case)" : "");
  if (!v.is_string()) bad_value(source_, path(key), what, v);
  const std::string s = v.get<std::string>();
  for (const auto& a : allowed) {
    if (a == s || (case_insensitive && lower(a) == lower(s))) {
      out = a;
      return;
    }
  }
  std::string near = nearest(s, allowed);
  bad_value(source_, path(key), what + (near.empty() ? "" : " (did you mean \"" + near + "\"?)"), v);
}

void Section::read_int_list(const std::string& key, std::vector<int64_t>& out, int64_t lo) const {
  if (!has(key)) return;
  const json& v = j_.at(key);
  std::string what = std::string("a list of ") + (lo == 1 ? "positive" : "non-negative") + " integers";
  if (!v.is_array()) bad_value(source_, path(key), what, v);
  std::vector<int64_t> items;
  for (const auto& e : v) {
    int64_t i = 0;
    if (!as_int64(e, i) || i < lo) bad_value(source_, path(key), what, v);
    items.push_back(i);
  }
  out = std::move(items);
}

void Section::read_section(const std::string& key, const std::function<void(const Section&)>& fn) const {
  if (!has(key)) return;
  fn(Section(j_.at(key), path(key), source_));
}

}  // namespace zt::config
