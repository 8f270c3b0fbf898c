#pragma once
// Note [progress line]: what a run says every few steps, on rank 0's stderr and as one JSON line of
// its metrics: step of total, epoch, loss, learning rate, gradient norm (and fp16's loss scale),
// the rate, the ETA and the memory. The rate's words are the caller's (samples/s, tokens/s, MFU:
// the CLI's Note [step cost]); the pace between two reports and the ETA are measured here.
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "zt/core/error.h"

namespace zt::train {

std::string fmt_eta(double seconds);  // "h:mm:ss"

// The run's pace between reports: steps [first_step, total_steps) of samples_per_step each.
class Pace {
 public:
  Pace(int64_t first_step, int64_t total_steps, int64_t samples_per_step);
  struct Report {
    int64_t from_step = 0;  // the steps since the last report: [from_step, steps_done)
    double samples_per_s = 0, step_ms = 0;
    double elapsed_s = 0, eta_s = 0;  // since the first step; to the last at this run's pace
  };
  Report report(int64_t steps_done);  // once `steps_done` steps have run; the next report starts here

 private:
  using Clock = std::chrono::steady_clock;
  int64_t first_, total_, samples_, last_step_;
  Clock::time_point t0_ = Clock::now(), last_ = t0_;
};

struct ProgressLine {
  int64_t step = 0, total_steps = 0;
  double epoch = 0, loss = 0, lr = 0, grad_norm = 0;
  std::optional<double> loss_scale;  // fp16's, where it scales
  std::string rate;                  // "12,345 samples/s" or the CLI's fuller words
  double eta_s = 0;
  std::string memory;  // the allocator's summary
};
// "step 3/10 | epoch 0.30 | loss 1.2345 | lr 1.00e-03 | grad-norm 0.456 | <rate> | ETA 0:00:07 | <memory>"
std::string format(const ProgressLine& p);

// One JSON line at the end of `path`, whole or not at all (a write that fails part-way is cut back
// off, so every line stays JSON); a file that is not a regular one, or any failed open or write,
// is an error of `kind` from `who` naming the file. Appended, never truncated.
void append_json_line(const std::string& path, const nlohmann::json& record, ErrorKind kind = ErrorKind::checkpoint,
                      const std::string& who = "[train]");

}  // namespace zt::train
