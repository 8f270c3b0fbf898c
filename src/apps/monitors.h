#pragma once
// DeepSpeed's `tensorboard` and `csv_monitor` sections: rank 0 also writes the scalars of each
// metrics record there, under DeepSpeed's tags (Train/Samples/..., steps counted in samples).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "zt/config/config.h"
#include "zt/monitor/monitor.h"

namespace zt::apps {

class Monitors {
 public:
  // The enabled writers; an empty output_path means run.dir (DeepSpeed's is the working folder).
  explicit Monitors(const config::Config& c);
  bool empty() const { return writers_.empty(); }
  // Every number in `record` (nested objects as tag parts, e.g. memory/peak) as `prefix`/key at `samples`.
  void write(const std::string& prefix, const nlohmann::json& record, int64_t samples);
  void flush();

 private:
  std::vector<std::unique_ptr<monitor::Monitor>> writers_;
};

}  // namespace zt::apps
