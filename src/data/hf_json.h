#pragma once
// Reading tokenizer.json's keys: every problem is one ErrorKind::data error naming the file, the
// key (as "model.merges[3]") and what was expected there.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "vocab_file.h"
#include "zt/core/error.h"

namespace zt::data::detail {

inline std::string hex(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%04X", v);
  return buf;
}

class JsonDoc {
 public:
  explicit JsonDoc(std::string path) : path_(std::move(path)) {}
  const std::string& path() const { return path_; }

  // obj[key], or null when obj is no object or lacks the key.
  static const nlohmann::json& field(const nlohmann::json& obj, const char* key) {
    static const nlohmann::json null;
    if (!obj.is_object()) return null;
    const auto it = obj.find(key);
    return it == obj.end() ? null : *it;
  }

  [[noreturn]] void fail(const std::string& key, const std::string& expected) const {
    ZT_THROW_AS(ErrorKind::data, "[tokenizer] ", path_, ": ", key, ": expected ", expected);
  }
  [[noreturn]] void fail(const std::string& key, const std::string& expected, const nlohmann::json& got) const {
    ZT_THROW_AS(ErrorKind::data, "[tokenizer] ", path_, ": ", key, ": expected ", expected, ", got ",
                clip_entry(got.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)));
  }
  void expect(bool ok, const std::string& key, const std::string& expected, const nlohmann::json& got) const {
    if (!ok) fail(key, expected, got);
  }

  // A key that must be there and not null; `at` is where obj sits ("" at the top).
  const nlohmann::json& get(const nlohmann::json& obj, const std::string& at, const char* key,
                            const std::string& expected) const {
    expect(obj.is_object(), at.empty() ? "the top level" : at, "an object", obj);
    const nlohmann::json& v = field(obj, key);
    if (v.is_null())
      ZT_THROW_AS(ErrorKind::data, "[tokenizer] ", path_, ": missing key ", join(at, key), " (expected ", expected,
                  ")");
    return v;
  }
  // nullptr when absent or null.
  const nlohmann::json* find(const nlohmann::json& obj, const char* key) const {
    const nlohmann::json& v = field(obj, key);
    return v.is_null() ? nullptr : &v;
  }

  std::string string(const nlohmann::json& obj, const std::string& at, const char* key) const {
    const nlohmann::json& v = get(obj, at, key, "a string");
    expect(v.is_string(), join(at, key), "a string", v);
    return v.get<std::string>();
  }
  std::string string(const nlohmann::json& obj, const std::string& at, const char* key, const char* def) const {
    return field(obj, key).is_null() ? def : string(obj, at, key);
  }
  bool flag(const nlohmann::json& obj, const std::string& at, const char* key, bool def) const {
    const nlohmann::json& v = field(obj, key);
    if (v.is_null()) return def;
    expect(v.is_boolean(), join(at, key), "true or false", v);
    return v.get<bool>();
  }
  int64_t integer(const nlohmann::json& obj, const std::string& at, const char* key, int64_t lo, int64_t hi) const {
    const nlohmann::json& v = get(obj, at, key, "an integer");
    const std::string range = "an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
    expect(v.is_number_integer(), join(at, key), range, v);
    const int64_t x = v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX) ? INT64_MAX : v.get<int64_t>();
    expect(x >= lo && x <= hi, join(at, key), range, v);
    return x;
  }
  int64_t integer(const nlohmann::json& obj, const std::string& at, const char* key, int64_t lo, int64_t hi,
                  int64_t def) const {
    return field(obj, key).is_null() ? def : integer(obj, at, key, lo, hi);
  }

 private:
  static std::string join(const std::string& at, const char* key) { return at.empty() ? key : at + "." + key; }
  std::string path_;
};

}  // namespace zt::data::detail
