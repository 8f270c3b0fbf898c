#include "zt/train/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "zt/core/append_file.h"

namespace zt::train {

std::string fmt_eta(double s) {
  char buf[32];
  const long t = long(s + 0.5);
  std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", t / 3600, (t / 60) % 60, t % 60);
  return buf;
}

Pace::Pace(int64_t first_step, int64_t total_steps, int64_t samples_per_step)
    : first_(first_step), total_(total_steps), samples_(samples_per_step), last_step_(first_step) {}

Pace::Report Pace::report(int64_t steps_done) {
  const auto now = Clock::now();
  const double dt = std::chrono::duration<double>(now - last_).count();
  const int64_t steps = steps_done - last_step_;
  Report r;
  r.from_step = last_step_;
  r.elapsed_s = std::chrono::duration<double>(now - t0_).count();
  r.samples_per_s = double(steps * samples_) / std::max(dt, 1e-9);
  r.step_ms = 1000 * dt / double(steps);
  r.eta_s = r.elapsed_s / double(steps_done - first_) * double(total_ - steps_done);
  last_ = now;
  last_step_ = steps_done;
  return r;
}

std::string format(const ProgressLine& p) {
  char scale[48] = "";  // %g: a scale past int64 (2^63 and up) must not print as a wrapped integer
  if (p.loss_scale) std::snprintf(scale, sizeof scale, " | loss-scale %g", *p.loss_scale);
  char head[256];
  std::snprintf(head, sizeof head, "step %lld/%lld | epoch %.2f | loss %.4f | lr %.2e | grad-norm %.3f%s",
                (long long)p.step, (long long)p.total_steps, p.epoch, p.loss, p.lr, p.grad_norm, scale);
  return std::string(head) + " | " + p.rate + " | ETA " + fmt_eta(p.eta_s) + " | " + p.memory;
}

void append_json_line(const std::string& path, const nlohmann::json& record, ErrorKind kind, const std::string& who) {
  const std::string line = record.dump() + "\n";
  const int fd = open_append(path, /*fresh=*/false, kind, who);
  try {  // a partial line is cut off again, so every line of the file stays JSON
    const off_t size = ::lseek(fd, 0, SEEK_END);  // where the line starts: O_APPEND writes there
    ZT_CHECK_AS(kind, size >= 0, who, " cannot seek in ", path, ": ", std::strerror(errno));
    append_whole(fd, path, line, size, kind, who);
  } catch (...) {
    ::close(fd);
    throw;
  }
  const int err = ::close(fd) != 0 && errno != EINTR ? errno : 0;
  ZT_CHECK_AS(kind, !err, who, " appending to ", path, " failed: ", std::strerror(err));
}

}  // namespace zt::train
