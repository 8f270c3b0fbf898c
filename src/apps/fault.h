#pragma once
// Fault injection for tests: ZT_FAULT="stall:rank=1:step=3" makes rank 1 stop answering before
// step 3; "exit:rank=1:step=3" makes it exit with status 3; "kill:..." sends it SIGKILL (kill -9).
// Step K+1 of a K-step run is the final save. With ":at=save" it fires instead inside the
// checkpoint saved after step K, once this rank's shard file is written and before the commit.
// "delay:rank=1:ms=5:at=all_gather+reduce_scatter+forward+step" (or at=all) makes rank 1 sleep
// that long before every all-gather and every reduce-scatter of its groups, after every forward
// and before every optimizer step, from the first step on: a run's result must not depend on
// its timing (issue 31).
// A spec that does not parse, or names a rank or step the run never reaches, is a config error.
#include <cstdint>
#include <string>

namespace zt::apps {

struct FaultPlan {
  // skip / eval (issue 31): the rank's program leaves its peers' at `step` (it skips that step, or
  // runs an evaluation pass first), which Note [collective signatures] must report, never hang on.
  std::string kind;  // "" (none), "stall", "exit", "kill", "skip", "eval", "delay"
  int rank = -1;
  int64_t step = -1;
  bool at_save = false;                             // fires inside the checkpoint save after `step`
  // delay: how long, and where.
  enum DelayAt : unsigned { all_gather = 1, reduce_scatter = 2, forward = 4, optimizer_step = 8, everywhere = 15 };
  double delay_s = 0;
  unsigned delay_at = 0;
  static FaultPlan parse(const std::string& spec);  // "" gives no fault
  static FaultPlan from_env();                      // parse(ZT_FAULT)
  // Throws unless the fault can fire in this run: rank < world, first_step < step <= total_steps
  // (+1 for the final save, which rank 0 alone writes), and at=save on a step that saves
  // (every_steps > 0 and step a multiple of it, or the last).
  void check_reachable(int world, int64_t total_steps, int64_t every_steps, int64_t first_step) const;
  void maybe_fire(int rank, int64_t step) const;          // before step `step` (not at=save)
  bool diverges() const;                                  // skip or eval
  // True (and says so) where this rank diverges in the way `what` ("skip", "eval") at `step`.
  bool diverges_at(const char* what, int rank, int64_t step) const;
  void maybe_fire_in_save(int rank, int64_t step) const;  // in the checkpoint after `step` (at=save)
  // delay: the collectives' sleeps installed in comm on the plan's rank (before step 1), and the
  // sleep after a forward or before an optimizer step.
  void install_delays(int rank) const;
  void maybe_delay(int rank, DelayAt where) const;
};

}  // namespace zt::apps
