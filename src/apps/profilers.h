#pragma once
// DeepSpeed's wall_clock_breakdown and comms_logger, as train reports them: forward, backward and
// optimizer-step time per step since the last print; the collectives' calls and bytes since then.
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "zt/comm/group.h"

namespace zt::apps {

struct WallClock {
  double forward_s = 0, backward_s = 0, step_s = 0;
  int64_t steps = 0;
  // "forward 12.3 ms | backward 25.1 ms | step 3.0 ms" per step; the same in a record's fields.
  std::string line() const;
  nlohmann::json fields() const;
  void reset() { *this = WallClock{}; }
};

// The collectives since `last` (then set to `now`): {"all_reduce": {"calls": ..., "bytes": ...}, ...}.
nlohmann::json comm_counts(const comm::CommStats& now, comm::CommStats& last);
// The run's collectives in one line, as DeepSpeed's comms_logger summary: "all_reduce 40 calls 1.2 MB, ...".
std::string comm_summary(const comm::CommStats& all);

}  // namespace zt::apps
