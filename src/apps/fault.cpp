#include "fault.h"

#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <thread>

#include "zt/core/error.h"

namespace zt::apps {

namespace {
// A decimal integer in [lo, hi] and nothing else (atoi read "x" as 0).
bool parse_int(const std::string& s, int64_t lo, int64_t hi, int64_t& out) {
  if (s.empty() || s.size() > 18 || s.find_first_not_of("0123456789") != std::string::npos) return false;
  out = std::stoll(s);
  return out >= lo && out <= hi;
}
}  // namespace

FaultPlan FaultPlan::parse(const std::string& spec) {
  FaultPlan f;
  if (spec.empty()) return f;
  std::stringstream ss(spec);
  std::string part;
  std::getline(ss, f.kind, ':');
  ZT_CHECK_AS(ErrorKind::config, f.kind == "stall" || f.kind == "exit" || f.kind == "kill", "[fault] ZT_FAULT kind '",
              f.kind, "' unknown (allowed: stall, exit, kill)");
  bool has_rank = false, has_step = false;
  while (std::getline(ss, part, ':')) {
    if (part.rfind("at=", 0) == 0) {
      ZT_CHECK_AS(ErrorKind::config, part == "at=step" || part == "at=save", "[fault] ZT_FAULT '", part,
                  "' unknown (allowed: at=step, at=save)");
      f.at_save = part == "at=save";
      continue;
    }
    const bool is_rank = part.rfind("rank=", 0) == 0, is_step = part.rfind("step=", 0) == 0;
    ZT_CHECK_AS(ErrorKind::config, is_rank || is_step, "[fault] ZT_FAULT part '", part,
                "' unknown (expected rank=R, step=K or at=step|save)");
    bool& seen = is_rank ? has_rank : has_step;
    ZT_CHECK_AS(ErrorKind::config, !seen, "[fault] ZT_FAULT gives '", part.substr(0, 4), "' twice in '", spec, "'");
    seen = true;
    int64_t v = 0;
    const bool ok = is_rank ? parse_int(part.substr(5), 0, INT32_MAX, v) : parse_int(part.substr(5), 1, INT64_MAX, v);
    ZT_CHECK_AS(ErrorKind::config, ok, "[fault] ZT_FAULT '", part,
                "': ", is_rank ? "the rank must be an integer >= 0" : "the step must be an integer >= 1");
    if (is_rank)
      f.rank = int(v);
    else
      f.step = v;
  }
  ZT_CHECK_AS(ErrorKind::config, has_rank && has_step, "[fault] ZT_FAULT needs rank=R and step=K, got '", spec, "'");
  return f;
}

FaultPlan FaultPlan::from_env() {
  const char* s = std::getenv("ZT_FAULT");
  return parse(s ? s : "");
}

void FaultPlan::check_reachable(int world, int64_t total_steps, int64_t every_steps, int64_t first_step) const {
  if (kind.empty()) return;
  ZT_CHECK_AS(ErrorKind::config, rank < world, "[fault] ZT_FAULT rank=", rank, " never fires: the job has ", world,
              " rank", world == 1 ? "" : "s", " (0..", world - 1, ")");
  const int64_t last = at_save ? total_steps : total_steps + 1;  // step K+1: the final save
  ZT_CHECK_AS(ErrorKind::config, step <= last, "[fault] ZT_FAULT step=", step, " never fires: the run has ",
              total_steps, " steps", at_save ? "" : " (step K+1 is the final save)");
  ZT_CHECK_AS(ErrorKind::config, at_save || step <= total_steps || rank == 0, "[fault] ZT_FAULT rank=", rank,
              " step=", step, " never fires: step K+1 is the final save, which rank 0 alone writes");
  ZT_CHECK_AS(ErrorKind::config, step > first_step, "[fault] ZT_FAULT step=", step,
              " never fires: the run resumes after step ", first_step);
  if (!at_save) return;
  ZT_CHECK_AS(ErrorKind::config, every_steps > 0, "[fault] ZT_FAULT at=save never fires: checkpoint.every_steps is 0, ",
              "so no checkpoint is saved");
  // A save after every every_steps-th step and after the last.
  ZT_CHECK_AS(ErrorKind::config, step % every_steps == 0 || step == total_steps, "[fault] ZT_FAULT step=", step,
              ":at=save never fires: checkpoints are saved every ", every_steps, " steps and after the last (step ",
              total_steps, ")");
}

namespace {
void fire(const FaultPlan& f, const char* where) {
  std::fprintf(stderr, "zerotrain: fault injection: rank %d %s %s %lld\n", f.rank, f.kind.c_str(), where,
               (long long)f.step);
  std::fflush(stderr);
  if (f.kind == "exit") std::_Exit(3);
  if (f.kind == "kill") std::raise(SIGKILL);
  for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));  // stall until the job is torn down
}
}  // namespace

void FaultPlan::maybe_fire(int rank_now, int64_t step_now) const {
  if (!kind.empty() && !at_save && rank_now == rank && step_now == step) fire(*this, "at step");
}

void FaultPlan::maybe_fire_in_save(int rank_now, int64_t step_now) const {
  if (!kind.empty() && at_save && rank_now == rank && step_now == step) fire(*this, "in the checkpoint after step");
}

}  // namespace zt::apps
