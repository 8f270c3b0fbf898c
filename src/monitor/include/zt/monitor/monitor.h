#pragma once
// DeepSpeed's monitors as writers (its `"tensorboard"` and `"csv_monitor"` sections): scalars
// by tag and step, in the files DeepSpeed's own monitors leave, so the same tools read them.
// Only rank 0 writes, as in DeepSpeed: the caller builds a monitor there alone.
//
// Every write is appended with write(2) straight away, whole or not at all (a failed write is cut
// off again), so a killed run leaves whole, readable records; flush() also fsyncs them, so they
// survive a machine crash. Failures throw zt::Error (ErrorKind::checkpoint, as the run's other
// outputs) naming the file. A monitor is not thread-safe.
#include <cstdint>
#include <string>
#include <vector>

namespace zt::monitor {

// One scalar at one step: DeepSpeed's event tuple (name, value, step), e.g.
// ("Train/Samples/train_loss", 2.31, 4096): its steps count samples, not optimizer steps.
struct Event {
  std::string tag;
  double value = 0;
  int64_t step = 0;
};

class Monitor {
 public:
  virtual ~Monitor() = default;
  // DeepSpeed's write_events: every event appended, in order, before it returns.
  virtual void write_events(const std::vector<Event>& events) = 0;
  void write_scalar(const std::string& tag, double value, int64_t step) { write_events({{tag, value, step}}); }
  // fsync of everything written so far (write_events already survives a killed process).
  virtual void flush() = 0;
  // The folder written into: log_dir_of(output_path, job_name).
  virtual const std::string& dir() const = 0;
};

// DeepSpeed's folder, os.path.join(output_path, job_name): job_name alone when output_path is
// empty (its default) and when job_name is absolute; one '/' between them otherwise.
std::string log_dir_of(const std::string& output_path, const std::string& job_name);

}  // namespace zt::monitor
