#pragma once
// DeepSpeed's `"tensorboard"` monitor: scalars in a TensorBoard event file (Note [event files]),
// the file torch.utils.tensorboard's SummaryWriter, which DeepSpeed uses, would write.
//
// Note [event files]: the file is
// `<log_dir>/events.out.tfevents.<unix seconds, 10 digits>.<hostname>.<pid>.<n>`, the name
// tensorboard's EventFileWriter gives it (n counts the files this process opened), in
// log_dir_of(output_path, job_name) as DeepSpeed's TensorBoardMonitor passes it. It is a
// sequence of TFRecords:
//   uint64 length (little endian) | uint32 masked crc32c(length's 8 bytes)
//   data (length bytes)           | uint32 masked crc32c(data)
// (mask_crc in crc32c.h), each data one serialized tensorflow.Event (event.proto, summary.proto):
//   Event         { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5; }
//   Summary       { repeated Value value = 1; }
//   Summary.Value { string tag = 1; float simple_value = 2; }
// The first record is {wall_time, file_version: "brain.Event:2"}; then one record per scalar,
// {wall_time, step, summary: {value: [{tag, simple_value}]}}, as SummaryWriter.add_scalar writes
// it: the value rounded to float, wall_time in seconds since the epoch. Fields are written in
// number order and a zero step is left out, as proto3 serializes them; a negative step is a
// 10-byte varint (two's complement). TensorBoard reads every file in the folder, so a resumed
// run adds a new file beside the old ones rather than appending to them.
#include <string>
#include <vector>

#include "zt/monitor/monitor.h"

namespace zt::monitor {

class TensorBoardMonitor : public Monitor {
 public:
  // Seconds since the epoch, the records' wall_time: the system clock unless a test gives one.
  using Clock = double (*)();
  // Creates log_dir_of(output_path, job_name) as needed and a new event file in it holding the
  // file_version record; throws naming the folder or the file.
  TensorBoardMonitor(const std::string& output_path, const std::string& job_name, Clock clock = nullptr);
  ~TensorBoardMonitor() override;
  TensorBoardMonitor(const TensorBoardMonitor&) = delete;
  TensorBoardMonitor& operator=(const TensorBoardMonitor&) = delete;

  // One record per event, all in one append (a failure leaves the file as it was).
  void write_events(const std::vector<Event>& events) override;
  void flush() override;
  const std::string& dir() const override { return dir_; }
  const std::string& file() const { return file_; }  // the event file's path

 private:
  std::string dir_, file_;
  Clock clock_;
  int fd_ = -1;
};

// The pieces of Note [event files], for tests and tools: one TFRecord around `data`, and one
// serialized Event holding a scalar (its simple_value is `value` rounded to float).
std::string tfrecord(const std::string& data);
std::string scalar_event(double wall_time, const std::string& tag, double value, int64_t step);

}  // namespace zt::monitor
