#pragma once
// Fault injection for tests: ZT_FAULT="stall:rank=1:step=3" makes rank 1 stop answering before
// step 3; "exit:rank=1:step=3" makes it exit with status 3. A spec that does not parse, or names
// a rank or step the run never reaches, is a config error (it would never fire).
#include <cstdint>
#include <string>

namespace zt::apps {

struct FaultPlan {
  std::string kind;  // "" (none), "stall", "exit"
  int rank = -1;
  int64_t step = -1;
  static FaultPlan parse(const std::string& spec);  // "" gives no fault
  static FaultPlan from_env();                      // parse(ZT_FAULT)
  // Throws unless the fault can fire: rank < world and step <= total_steps.
  void check_reachable(int world, int64_t total_steps) const;
  void maybe_fire(int rank, int64_t step) const;
};

}  // namespace zt::apps
