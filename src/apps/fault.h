#pragma once
// Fault injection for tests (Note [fault injection]): ZT_FAULT="stall:rank=1:step=3" makes
// rank 1 stop answering before step 3; "exit:rank=1:step=3" makes it exit with status 3.
// In a K-step run, step=K+1 fires in the final save (rank 0: before it writes the outputs).
#include <cstdint>
#include <string>

namespace zt::apps {

struct FaultPlan {
  std::string kind;  // "" (none), "stall", "exit"
  int rank = -1;
  int64_t step = -1;
  static FaultPlan from_env();
  void maybe_fire(int rank, int64_t step) const;
};

}  // namespace zt::apps
