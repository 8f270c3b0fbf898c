#include "fault.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <thread>

#include "zt/core/error.h"

namespace zt::apps {

FaultPlan FaultPlan::from_env() {
  FaultPlan f;
  const char* s = std::getenv("ZT_FAULT");
  if (!s || !*s) return f;
  std::stringstream ss(s);
  std::string part;
  std::getline(ss, f.kind, ':');
  ZT_CHECK_AS(ErrorKind::config, f.kind == "stall" || f.kind == "exit", "[fault] ZT_FAULT kind '", f.kind,
              "' unknown (allowed: stall, exit)");
  while (std::getline(ss, part, ':')) {
    if (part.rfind("rank=", 0) == 0) f.rank = std::atoi(part.c_str() + 5);
    else if (part.rfind("step=", 0) == 0) f.step = std::atoll(part.c_str() + 5);
    else
      ZT_THROW_AS(ErrorKind::config, "[fault] ZT_FAULT part '", part, "' unknown (expected rank=R or step=K)");
  }
  ZT_CHECK_AS(ErrorKind::config, f.rank >= 0 && f.step >= 1, "[fault] ZT_FAULT needs rank=R and step=K, got '", s, "'");
  return f;
}

void FaultPlan::maybe_fire(int rank_now, int64_t step_now) const {
  if (kind.empty() || rank_now != rank || step_now != step) return;
  std::fprintf(stderr, "zerotrain: fault injection: rank %d %s at step %lld\n", rank, kind.c_str(), (long long)step);
  std::fflush(stderr);
  if (kind == "exit") std::_Exit(3);
  for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));  // stall until the job is torn down
}

}  // namespace zt::apps
