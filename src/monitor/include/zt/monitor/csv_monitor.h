#pragma once
// DeepSpeed's `"csv_monitor"`: one CSV file per tag in log_dir_of(output_path, job_name), named
// after the tag with '/' and ' ' made '_' ("Train/Samples/lr" -> Train_Samples_lr.csv), holding a
// header row `step,<the tag's last '/' part>` and then `step,value` rows, as Python's csv module
// writes them (Note [csv_monitor files]).
//
// Note [csv_monitor files]: DeepSpeed's csv.writer ends rows in "\r\n" (its default dialect, in a
// file opened without newline=''), quotes a field holding ',', '"', '\r' or '\n' (doubling '"'),
// and prints the value as Python's repr of a float (0.1, 1.0, 1e-05, 1e+16, nan, inf) and the step
// as an integer; python_float_repr gives those bytes. Tags that map to the same file share it,
// under the first one's header. One difference: DeepSpeed writes the header again whenever a new
// process first appends to a file, so a resumed run's file has a second header mid-file; here it
// heads the file only, written when the file is empty.
#include <map>
#include <string>
#include <vector>

#include "zt/monitor/monitor.h"

namespace zt::monitor {

class CsvMonitor : public Monitor {
 public:
  // Creates log_dir_of(output_path, job_name) as needed (throws naming it); files open on first use.
  CsvMonitor(const std::string& output_path, const std::string& job_name);
  ~CsvMonitor() override;
  CsvMonitor(const CsvMonitor&) = delete;
  CsvMonitor& operator=(const CsvMonitor&) = delete;

  // A row per event, each appended to its tag's file whole or not at all.
  void write_events(const std::vector<Event>& events) override;
  void flush() override;
  const std::string& dir() const override { return dir_; }

  // The file a tag's rows go to, and that file's header field.
  static std::string file_name_of(const std::string& tag);
  static std::string header_of(const std::string& tag);

 private:
  std::string dir_;
  std::map<std::string, int> fds_;  // by file name, open for appending
};

// Python's repr(float): the shortest digits that read back as `v`, positioned as CPython does.
std::string python_float_repr(double v);
// One field as Python's csv.writer (QUOTE_MINIMAL) writes it.
std::string csv_field(const std::string& s);

}  // namespace zt::monitor
