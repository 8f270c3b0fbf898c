#pragma once
// What the training benchmarks (bench_train, bench_gpt) share: threads per rank, the timed step
// loop, and the overlap fields they print (Note [overlap] in zt/zero/engine.h).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "zt/comm/group.h"
#include "zt/core/affinity.h"
#include "zt/core/tensor.h"
#include "zt/zero/engine.h"

namespace zt::bench {

inline int default_threads() {  // as zerotrain's (Note [default threads])
  const LocalRank local = local_rank_from_env();
  return choose_threads(cpu_view(), local.bound, local.size).threads;
}

struct TimedSteps {
  double median_s = 0, mean_s = 0;   // rank 0's step times
  double total_s = 0;                // the slowest rank's wall time over the timed steps
  double last_loss = 0;              // the last step's loss, averaged over ranks
  zero::CommOverlap reduce, gather;  // summed over the timed steps
};

// Runs `warmup` untimed steps, a barrier, then `steps` timed ones; step(s) trains global step s
// and returns its StepStats and loss.
template <typename Step>
TimedSteps time_steps(comm::Group& g, int64_t warmup, int64_t steps, Step step) {
  using Clock = std::chrono::steady_clock;
  TimedSteps out;
  std::vector<double> sec;
  Clock::time_point t0;
  for (int64_t s = 0; s < warmup + steps; ++s) {
    if (s == warmup) {
      g.barrier();
      t0 = Clock::now();
    }
    const auto ts = Clock::now();
    const std::pair<zero::StepStats, Tensor> r = step(s);
    if (s < warmup) continue;
    sec.push_back(std::chrono::duration<double>(Clock::now() - ts).count());
    out.reduce += r.first.reduce;
    out.gather += r.first.gather;
    if (s + 1 == warmup + steps) out.last_loss = r.second.item();
  }
  comm::CollOptions max;
  max.op = comm::ReduceOp::max;
  out.total_s = g.all_reduce_scalar(std::chrono::duration<double>(Clock::now() - t0).count(), max);
  for (double v : sec) out.mean_s += v / double(sec.size());
  std::nth_element(sec.begin(), sec.begin() + ptrdiff_t(sec.size() / 2), sec.end());
  out.median_s = sec[sec.size() / 2];
  out.last_loss = g.all_reduce_scalar(out.last_loss) / double(g.size());
  return out;
}

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
