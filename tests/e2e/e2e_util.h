#pragma once
// Shared by the end-to-end tests: run the zerotrain binary (directly or under mpirun) from the
// source folder, and read what it wrote.
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "../common/shell_word.h"

namespace zt::e2e {

namespace fs = std::filesystem;

struct Result {
  int code;
  std::string out;  // stdout + stderr
};

// limit_s > 0: under `timeout`, so a regression that blocks fails instead of hanging the suite.
inline Result run(const std::string& cmd, int limit_s = 0) {
  const std::string bounded = limit_s > 0 ? "timeout -k 5 " + std::to_string(limit_s) + " " + cmd : cmd;
  const std::string full = "cd " + zt::testing::shell_word(ZT_SOURCE_DIR) + " && " + bounded + " 2>&1";
  FILE* p = popen(full.c_str(), "r");
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int st = pclose(p);
  return {WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st), out};
}

// Under AddressSanitizer the process's memory is ASan's (its allocator, redzones and shadow), and
// the largest runs take minutes: the tests that measure RSS or train full-size models skip.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAsan = true;
#else
constexpr bool kAsan = false;
#endif

inline bool have_mnist() { return fs::exists(fs::path(ZT_SOURCE_DIR) / "data/mnist/t10k-labels-idx1-ubyte"); }

// A fresh, empty folder under the temporary directory.
inline std::string tmpdir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("zt_e2e_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d.string();
}

inline std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

inline std::string write_file(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
  return path;
}

inline nlohmann::json read_json(const std::string& path) {
  std::ifstream f(path);
  return nlohmann::json::parse(f);
}

inline std::vector<nlohmann::json> read_jsonl(const std::string& path) {
  std::ifstream f(path);
  std::vector<nlohmann::json> out;
  for (std::string line; std::getline(f, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

// MNIST-format IDX files of random images and labels (train: n_train, t10k: n_test) in dir, small
// enough that reading them never sets a process's peak memory.
inline void write_random_idx(const std::string& dir, uint32_t n_train, uint32_t n_test, uint32_t seed = 7) {
  fs::create_directories(dir);
  std::mt19937 gen(seed);
  auto be32 = [](std::string& s, uint32_t v) {
    for (int k = 24; k >= 0; k -= 8) s.push_back(char(v >> k));
  };
  for (auto [split, n] : {std::pair{"train", n_train}, std::pair{"t10k", n_test}}) {
    std::string images, labels;
    be32(images, 0x803), be32(images, n), be32(images, 28), be32(images, 28);
    be32(labels, 0x801), be32(labels, n);
    for (uint32_t i = 0; i < n * 784; ++i) images.push_back(char(gen() & 255));
    for (uint32_t i = 0; i < n; ++i) labels.push_back(char(gen() % 10));
    write_file(dir + "/" + split + "-images-idx3-ubyte", images);
    write_file(dir + "/" + split + "-labels-idx1-ubyte", labels);
  }
}

// Token shards in llm.c's format (train_000000.bin, val_000000.bin) of random GPT-2 ids in dir.
inline void write_random_tokens(const std::string& dir, int n_train, int n_val, uint32_t seed = 7,
                                uint32_t vocab = 50257) {
  fs::create_directories(dir);
  std::mt19937 gen(seed);
  for (auto [split, n] : {std::pair{"train", n_train}, std::pair{"val", n_val}}) {
    std::vector<int32_t> header(256, 0);
    header[0] = 20240520, header[1] = 1, header[2] = n;
    std::string bytes(reinterpret_cast<const char*>(header.data()), 1024);
    for (int i = 0; i < n; ++i) {
      const uint16_t t = uint16_t(gen() % vocab);
      bytes.append(reinterpret_cast<const char*>(&t), 2);
    }
    write_file(dir + "/" + split + "_000000.bin", bytes);
  }
}

// step -> logged loss, from a run directory's metrics.jsonl.
inline std::map<int64_t, double> logged_losses(const std::string& dir) {
  std::map<int64_t, double> out;
  for (const auto& j : read_jsonl(dir + "/metrics.jsonl"))
    if (j.contains("step") && j.contains("loss")) out[j["step"].get<int64_t>()] = j["loss"].get<double>();
  return out;
}

inline int count_lines(const std::string& s) { return int(std::count(s.begin(), s.end(), '\n')); }

inline int count_of(const std::string& s, const std::string& what) {
  int n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

}  // namespace zt::e2e
