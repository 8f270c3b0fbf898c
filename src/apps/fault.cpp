#include "fault.h"

#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <thread>

#include "zt/comm/group.h"
#include "zt/core/error.h"

namespace zt::apps {

namespace {
// A decimal integer in [lo, hi] and nothing else (atoi read "x" as 0).
bool parse_int(const std::string& s, int64_t lo, int64_t hi, int64_t& out) {
  if (s.empty() || s.size() > 18 || s.find_first_not_of("0123456789") != std::string::npos) return false;
  out = std::stoll(s);
  return out >= lo && out <= hi;
}

// "delay:rank=R:ms=N:at=all_gather+reduce_scatter+forward+step" or at=all.
FaultPlan parse_delay(const std::string& spec, std::stringstream& ss) {
  FaultPlan f;
  f.kind = "delay";
  std::string part;
  int64_t ms = -1, rank = -1;
  while (std::getline(ss, part, ':')) {
    if (part.rfind("rank=", 0) == 0) {
      ZT_CHECK_AS(ErrorKind::config, parse_int(part.substr(5), 0, INT32_MAX, rank), "[fault] ZT_FAULT '", part,
                  "': the rank must be an integer >= 0");
    } else if (part.rfind("ms=", 0) == 0) {
      ZT_CHECK_AS(ErrorKind::config, parse_int(part.substr(3), 1, 60000, ms), "[fault] ZT_FAULT '", part,
                  "': the delay must be 1 to 60000 ms");
    } else if (part.rfind("at=", 0) == 0) {
      std::stringstream places(part.substr(3));
      for (std::string w; std::getline(places, w, '+');) {
        const unsigned bit = w == "all_gather"       ? FaultPlan::all_gather
                             : w == "reduce_scatter" ? FaultPlan::reduce_scatter
                             : w == "forward"        ? FaultPlan::forward
                             : w == "step"           ? FaultPlan::optimizer_step
                             : w == "all"            ? FaultPlan::everywhere
                                                     : 0u;
        ZT_CHECK_AS(ErrorKind::config, bit != 0, "[fault] ZT_FAULT delay place '", w,
                    "' unknown (allowed: all_gather, reduce_scatter, forward, step, all; joined by +)");
        f.delay_at |= bit;
      }
    } else {
      ZT_THROW_AS(ErrorKind::config, "[fault] ZT_FAULT part '", part, "' unknown (a delay takes rank=R, ms=N, at=...)");
    }
  }
  ZT_CHECK_AS(ErrorKind::config, rank >= 0 && ms > 0 && f.delay_at != 0,
              "[fault] ZT_FAULT delay needs rank=R, ms=N and at=PLACES, got '", spec, "'");
  f.rank = int(rank);
  f.delay_s = double(ms) / 1000;
  return f;
}

}  // namespace

FaultPlan FaultPlan::parse(const std::string& spec) {
  FaultPlan f;
  if (spec.empty()) return f;
  std::stringstream ss(spec);
  std::string part;
  std::getline(ss, f.kind, ':');
  if (f.kind == "delay") return parse_delay(spec, ss);
  ZT_CHECK_AS(ErrorKind::config, f.kind == "stall" || f.kind == "exit" || f.kind == "kill" || f.diverges(),
              "[fault] ZT_FAULT kind '", f.kind, "' unknown (allowed: stall, exit, kill, skip, eval, delay)");
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
  if (kind == "delay") return;  // every step
  const int64_t last = at_save ? total_steps : total_steps + 1;  // step K+1: the final save
  ZT_CHECK_AS(ErrorKind::config, step <= last, "[fault] ZT_FAULT step=", step, " never fires: the run has ",
              total_steps, " steps", at_save ? "" : " (step K+1 is the final save)");
  ZT_CHECK_AS(ErrorKind::config, !diverges() || step <= total_steps, "[fault] ZT_FAULT ", kind, " step=", step,
              " never fires: the run has ", total_steps, " steps");
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
  if (!kind.empty() && kind != "delay" && !diverges() && !at_save && rank_now == rank && step_now == step)
    fire(*this, "at step");
}

bool FaultPlan::diverges() const { return kind == "skip" || kind == "eval"; }

bool FaultPlan::diverges_at(const char* what, int rank_now, int64_t step_now) const {
  if (kind != what || rank_now != rank || step_now != step) return false;
  std::fprintf(stderr, "zerotrain: fault injection: rank %d %s at step %lld\n", rank,
               kind == "skip" ? "skips its step" : "evaluates instead of training", (long long)step);
  return true;
}

void FaultPlan::install_delays(int rank_now) const {
  if (kind != "delay" || rank_now != rank) return;
  std::fprintf(stderr, "zerotrain: fault injection: rank %d sleeps %g ms at%s%s%s%s\n", rank, delay_s * 1e3,
               delay_at & all_gather ? " all_gather" : "", delay_at & reduce_scatter ? " reduce_scatter" : "",
               delay_at & forward ? " forward" : "", delay_at & optimizer_step ? " step" : "");
  if (delay_at & all_gather) comm::inject_delay_for_testing(comm::Coll::all_gather, delay_s);
  if (delay_at & reduce_scatter) comm::inject_delay_for_testing(comm::Coll::reduce_scatter, delay_s);
}

void FaultPlan::maybe_delay(int rank_now, DelayAt where) const {
  if (kind == "delay" && rank_now == rank && (delay_at & where))
    std::this_thread::sleep_for(std::chrono::duration<double>(delay_s));
}

void FaultPlan::maybe_fire_in_save(int rank_now, int64_t step_now) const {
  if (!kind.empty() && at_save && rank_now == rank && step_now == step) fire(*this, "in the checkpoint after step");
}

}  // namespace zt::apps
