#pragma once
// Runs a shell command from the source folder and returns its exit status and output.
#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace zt::e2e {

struct Result {
  int code;
  std::string out;  // stdout + stderr
};

inline Result run(const std::string& cmd) {
  std::string full = "cd " ZT_SOURCE_DIR " && " + cmd + " 2>&1";
  FILE* p = popen(full.c_str(), "r");
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int st = pclose(p);
  return {WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st), out};
}

}  // namespace zt::e2e
