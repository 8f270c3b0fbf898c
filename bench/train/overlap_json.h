#pragma once
// The overlap fields the training benchmarks print (Note [overlap] in zt/zero/engine.h).
#include <cstdio>
#include <optional>
#include <string>

#include "zt/zero/engine.h"

namespace zt::bench {

// A JSON number, or null when the backend could not measure it.
inline std::string fraction(std::optional<double> v) {
  if (!v) return "null";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", *v);
  return buf;
}

// "reduce_busy_s":..,"reduce_blocked_s":..,"comm_hidden_fraction":..,"gather_hidden_fraction":.., (trailing comma)
inline std::string overlap_fields(const zero::CommOverlap& reduce, const zero::CommOverlap& gather) {
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "\"reduce_busy_s\":%.4f,\"reduce_blocked_s\":%.4f,\"comm_hidden_fraction\":%s,"
                "\"gather_hidden_fraction\":%s,",
                reduce.busy_s, reduce.blocked_s, fraction(reduce.hidden()).c_str(), fraction(gather.hidden()).c_str());
  return buf;
}

}  // namespace zt::bench
