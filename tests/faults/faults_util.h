#pragma once
// Shared by the fault suites: run zerotrain (bounded in time), in the background, in folders
// of this process's own; snapshots of what an earlier run saved; a small tmpfs to fill.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "../common/shell_word.h"

namespace fs = std::filesystem;

namespace zt::faults {

// A shell word wherever the clone lives (the tests build shell commands with it).
const std::string kBin = zt::testing::shell_word(std::getenv("ZT_FAULTS_BIN") ? std::getenv("ZT_FAULTS_BIN") : ZT_BIN);
const std::string kMpi = std::string(ZT_MPIRUN) + " -np 2 ";
// Small and short: a 25k-parameter MLP (100 KB of weights), 20 steps on 3,200 samples.
const std::string kArgs =
    " --config configs/mnist_mlp.json model.hidden=[32] data.train_limit=3200 data.test_limit=1000"
    " steps_per_print=10";
const std::string kTrain = " train" + kArgs + " run.max_steps=20";

struct Result {
  int code;
  std::string out;  // stdout + stderr
};

inline int status_code(int st) { return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st); }

// A hang fails the test instead of blocking the suite: 124/137 after `limit_s`.
inline Result run(const std::string& cmd, int limit_s = 120) {
  const std::string full = "cd " + zt::testing::shell_word(ZT_SOURCE_DIR) + " && timeout -k 5 " + std::to_string(limit_s) + " " + cmd + " 2>&1";
  FILE* p = popen(full.c_str(), "r");
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  return {status_code(pclose(p)), out};
}

// A command in the background (sh execs it: the pid is the command's), output to a file;
// ended with SIGTERM if the test leaves before waiting for it.
class Background {
 public:
  Background(const std::string& cmd, const std::string& log) : log_(log) {
    pid_ = fork();
    if (pid_ == 0) {
      const std::string full = "cd " + zt::testing::shell_word(ZT_SOURCE_DIR) + " && exec " + cmd + " > " + log + " 2>&1";
      execl("/bin/sh", "sh", "-c", full.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
  }
  ~Background() {
    if (pid_ <= 0) return;
    kill(pid_, SIGTERM);
    wait();
  }
  Background(const Background&) = delete;
  Background& operator=(const Background&) = delete;

  pid_t pid() const { return pid_; }
  Result wait() {
    int st = 0;
    waitpid(pid_, &st, 0);
    pid_ = -1;
    std::ifstream f(log_);
    return {status_code(st), std::string((std::istreambuf_iterator<char>(f)), {})};
  }

 private:
  pid_t pid_ = -1;
  std::string log_;
};

inline bool have_mnist() { return fs::exists(fs::path(ZT_SOURCE_DIR) / "data/mnist/t10k-labels-idx1-ubyte"); }

// Everything a run of this binary writes, removed at the end (one folder per process, so that
// concurrent ctest jobs and worktrees never share one).
const fs::path kRoot = fs::temp_directory_path() / ("zt_faults_" + std::to_string(::getpid()));
struct RemoveRoot : ::testing::Environment {
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(kRoot, ec);
  }
};
const auto* const kRemoveRoot = ::testing::AddGlobalTestEnvironment(new RemoveRoot);

inline std::string tmpdir(const std::string& name) {
  fs::path d = kRoot / name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d.string();
}

inline std::string read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), {});
}

// Waits up to 60 s for `ready`; false if it never came.
inline bool wait_for(const std::function<bool()>& ready) {
  for (int i = 0; i < 6000; ++i) {
    if (ready()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

// The lines zerotrain says about a failure: "zerotrain: error..." and "zerotrain: interrupted...".
inline std::vector<std::string> failure_lines(const std::string& out) {
  std::vector<std::string> lines;
  std::istringstream in(out);
  for (std::string l; std::getline(in, l);)
    if (l.rfind("zerotrain: error", 0) == 0 || l.rfind("zerotrain: interrupted", 0) == 0) lines.push_back(l);
  return lines;
}

// The one failure line, or "" (and a test failure) if there is not exactly one.
inline std::string one_failure_line(const Result& r) {
  const auto lines = failure_lines(r.out);
  EXPECT_EQ(lines.size(), 1u) << r.out;
  return lines.size() == 1 ? lines[0] : "";
}

// What an earlier run saved, to compare after a failing one.
struct Saved {
  std::string dir, model, summary;
  int finals = 0;  // "final" records in metrics.jsonl
};

inline int count_finals(const std::string& dir) {
  std::ifstream f(dir + "/metrics.jsonl");
  int finals = 0;
  for (std::string line; std::getline(f, line);) {
    nlohmann::json j;
    EXPECT_NO_THROW(j = nlohmann::json::parse(line)) << "metrics.jsonl has a line that is not JSON: " << line;
    finals += j.value("event", "") == "final";
  }
  return finals;
}

inline Saved snapshot(const std::string& dir) {
  return {dir, read_bytes(dir + "/model.safetensors"), read_bytes(dir + "/summary.json"), count_finals(dir)};
}

// `replaced`: an output the test itself replaced, not compared.
inline void expect_nothing_saved_changed(const Saved& s, const std::string& replaced = "") {
  if (replaced != "model.safetensors") {
    EXPECT_EQ(read_bytes(s.dir + "/model.safetensors"), s.model) << "model.safetensors changed";
  }
  if (replaced != "summary.json") {
    EXPECT_EQ(read_bytes(s.dir + "/summary.json"), s.summary) << "summary.json changed";
  }
  if (replaced != "metrics.jsonl") {
    EXPECT_EQ(count_finals(s.dir), s.finals) << "metrics.jsonl got a \"final\" record";
  }
  for (const auto& e : fs::directory_iterator(s.dir))
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << "left behind: " << e.path();
}

inline Saved earlier_run(const std::string& dir) {
  Result r = run(kMpi + kBin + kTrain + " run.dir=" + dir);
  EXPECT_EQ(r.code, 0) << r.out;
  return snapshot(dir);
}

inline std::string holder_pid(const std::string& dir) {
  const std::string s = read_bytes(dir + "/zerotrain.lock");
  return s.rfind("pid ", 0) == 0 ? s.substr(4, s.find(' ', 4) - 4) : "";
}

// A small tmpfs, mounted by the test (root here and in CI), filled up to the chosen point.
class FullDisk : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have_mnist()) GTEST_SKIP() << "MNIST not installed (scripts/setup.sh)";
    mnt_ = tmpdir("fulldisk");
    if (mount("tmpfs", mnt_.c_str(), "tmpfs", 0, "size=1m") != 0)
      GTEST_SKIP() << "cannot mount a tmpfs (" << std::strerror(errno) << "): the full-disk cases need root";
    mounted_ = true;
  }
  void TearDown() override {
    if (mounted_) umount2(mnt_.c_str(), MNT_DETACH);
  }
  // Fills the disk, then frees whole pages again until exactly `leave` bytes are free.
  void fill_leaving(uint64_t leave) {
    const std::string filler = mnt_ + "/filler";
    FILE* f = std::fopen(filler.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    std::vector<char> block(4096, 'x');
    while (std::fwrite(block.data(), 1, block.size(), f) == block.size() && std::fflush(f) == 0) {
    }
    std::fclose(f);
    uint64_t size = fs::file_size(filler) / 4096 * 4096;
    fs::resize_file(filler, size);
    while (free_bytes() < leave && size >= 4096) fs::resize_file(filler, size -= 4096);
    ASSERT_EQ(free_bytes(), leave);
  }
  uint64_t free_bytes() const {
    struct statvfs st {};
    statvfs(mnt_.c_str(), &st);
    return uint64_t(st.f_bavail) * st.f_frsize;
  }
  std::string mnt_;
  bool mounted_ = false;
};

}  // namespace zt::faults
