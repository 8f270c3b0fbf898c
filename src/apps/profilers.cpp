#include "profilers.h"

#include <cstdio>

namespace zt::apps {

std::string WallClock::line() const {
  const double n = double(std::max<int64_t>(1, steps));
  char s[128];
  std::snprintf(s, sizeof s, "forward %.1f ms | backward %.1f ms | step %.1f ms", 1e3 * forward_s / n,
                1e3 * backward_s / n, 1e3 * step_s / n);
  return s;
}

nlohmann::json WallClock::fields() const {
  const double n = double(std::max<int64_t>(1, steps));
  return {{"forward_ms", 1e3 * forward_s / n}, {"backward_ms", 1e3 * backward_s / n}, {"optimizer_step_ms", 1e3 * step_s / n}};
}

nlohmann::json comm_counts(const comm::CommStats& now, comm::CommStats& last) {
  nlohmann::json out = nlohmann::json::object();
  for (size_t k = 0; k < comm::kNumColl; ++k) {
    const uint64_t calls = now.calls[k] - last.calls[k], bytes = now.bytes[k] - last.bytes[k];
    if (calls > 0) out[comm::coll_name(comm::Coll(k))] = {{"calls", calls}, {"bytes", bytes}};
  }
  last = now;
  return out;
}

std::string comm_summary(const comm::CommStats& all) {
  std::string s;
  for (size_t k = 0; k < comm::kNumColl; ++k) {
    if (all.calls[k] == 0) continue;
    char part[96];
    std::snprintf(part, sizeof part, "%s%s %llu calls %.3g MB", s.empty() ? "" : ", ", comm::coll_name(comm::Coll(k)),
                  (unsigned long long)all.calls[k], double(all.bytes[k]) / 1e6);
    s += part;
  }
  return s.empty() ? "no collectives" : s;
}

}  // namespace zt::apps
