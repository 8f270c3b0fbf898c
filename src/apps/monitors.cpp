#include "monitors.h"

#include "zt/monitor/csv_monitor.h"
#include "zt/monitor/tensorboard.h"

namespace zt::apps {
namespace {

void collect(const std::string& tag, const nlohmann::json& v, int64_t samples, std::vector<monitor::Event>& out) {
  if (v.is_number() && !v.is_number_unsigned())
    out.push_back({tag, v.get<double>(), samples});
  else if (v.is_number_unsigned())
    out.push_back({tag, double(v.get<uint64_t>()), samples});
  else if (v.is_object())
    for (const auto& [key, child] : v.items()) collect(tag + "/" + key, child, samples, out);
}

}  // namespace

Monitors::Monitors(const config::Config& c) {
  const auto& m = c.monitor;
  const auto path = [&](const config::MonitorConfig::Writer& w) {
    return w.output_path.empty() ? c.run.dir : w.output_path;
  };
  if (m.tensorboard.enabled)
    writers_.push_back(std::make_unique<monitor::TensorBoardMonitor>(path(m.tensorboard), m.tensorboard.job_name));
  if (m.csv_monitor.enabled)
    writers_.push_back(std::make_unique<monitor::CsvMonitor>(path(m.csv_monitor), m.csv_monitor.job_name));
}

void Monitors::write(const std::string& prefix, const nlohmann::json& record, int64_t samples) {
  if (writers_.empty()) return;
  std::vector<monitor::Event> events;
  for (const auto& [key, v] : record.items())
    if (key != "step") collect(prefix + "/" + key, v, samples, events);
  for (auto& w : writers_) w->write_events(events);
}

void Monitors::flush() {
  for (auto& w : writers_) w->flush();
}

}  // namespace zt::apps
