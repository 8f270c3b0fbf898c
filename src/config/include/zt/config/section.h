#pragma once
// One JSON object of a config, read key by key: every key must be known, every value is checked
// for type and range, and errors name the source, the dotted key and the value found. Public so a
// model family reads its own keys of the `model` section as config reads the others
// (Note [model registry]).
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace zt::config {

namespace detail {
// At most `max_chars` of `s`, with "..." and the full length when cut.
std::string clip(const std::string& s, size_t max_chars = 80);
// `v` as JSON text, at most about `max_chars` long; recursion stops a few levels down ("...").
std::string short_dump(const nlohmann::json& v, size_t max_chars = 80);
}  // namespace detail

// One JSON object at dotted path `prefix` ("" for the top level).
class Section {
 public:
  Section(const nlohmann::json& j, std::string prefix, const std::string& source);

  // Throws on the first key not in `known`, suggesting the nearest known key; `whose` (e.g.
  // "model.type gpt") says whose keys they are in the message.
  void allow(const std::vector<std::string>& known, const std::string& whose = "") const;
  bool has(const std::string& key) const { return j_.contains(key); }
  std::string path(const std::string& key) const { return prefix_.empty() ? key : prefix_ + "." + key; }
  const std::string& source() const { return source_; }

  // Each reader leaves `out` unchanged when the key is absent.
  void read_int(const std::string& key, int64_t& out, int64_t lo,
                int64_t hi = std::numeric_limits<int64_t>::max()) const;
  void read_int(const std::string& key, int& out, int lo, int hi = std::numeric_limits<int>::max()) const;
  void read_u64(const std::string& key, uint64_t& out) const;
  // Range [lo, hi] with either end open; pass infinity for no upper bound.
  void read_number(const std::string& key, double& out, double lo, bool lo_open,
                   double hi = std::numeric_limits<double>::infinity(), bool hi_open = true) const;
  void read_bool(const std::string& key, bool& out) const;
  void read_string(const std::string& key, std::string& out, bool allow_empty = false) const;
  // A file or folder path: a string without control characters (a NUL would cut the path, and
  // every message naming it, short).
  void read_path(const std::string& key, std::string& out, bool allow_empty = false) const;
  // One of `allowed` (compared case-insensitively when asked); `out` gets the canonical spelling.
  void read_choice(const std::string& key, std::string& out, const std::vector<std::string>& allowed,
                   bool case_insensitive = false) const;
  void read_int_list(const std::string& key, std::vector<int64_t>& out, int64_t lo) const;
  // A nested object (`what` = the key), validated by `fn`.
  void read_section(const std::string& key, const std::function<void(const Section&)>& fn) const;

  const nlohmann::json& value(const std::string& key) const { return j_.at(key); }

 private:
  const nlohmann::json& j_;
  std::string prefix_;
  const std::string& source_;
};

}  // namespace zt::config
