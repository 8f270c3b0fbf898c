#include "loss_curves.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "zt/core/atomic_file.h"
#include "zt/core/error.h"

namespace zt::apps {

namespace {
// Drops the points at steps >= s (Note [resumed runs]).
void cut_from(std::vector<LossPoint>& curve, int64_t s) {
  while (!curve.empty() && curve.back().step >= s) curve.pop_back();
}

void add(std::vector<LossPoint>& curve, const nlohmann::json& rec, const char* key, int64_t step) {
  const auto it = rec.find(key);
  if (it == rec.end() || !it->is_number()) return;
  cut_from(curve, step);
  curve.push_back({step, it->get<double>()});
}
}  // namespace

LossCurves parse_loss_curves(std::istream& in) {
  LossCurves c;
  bool restarted = false;
  for (std::string line; std::getline(in, line);) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const nlohmann::json rec = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!rec.is_object()) {
      ++c.skipped_lines;
      continue;
    }
    if (const auto ev = rec.find("event"); ev != rec.end() && *ev == "start") {
      ++c.runs;
      restarted = true;
    }
    const auto step = rec.find("step");
    if (step == rec.end() || !step->is_number_integer()) continue;
    if (step->is_number_unsigned() && step->get<uint64_t>() > uint64_t(INT64_MAX)) continue;
    const int64_t s = step->get<int64_t>();
    if (restarted) {  // the new run's first step replaces what the old one logged from there on
      cut_from(c.train, s);
      cut_from(c.val, s);
      restarted = false;
    }
    add(c.train, rec, "loss", s);
    add(c.val, rec, "val_loss", s);
  }
  return c;
}

LossCurves read_loss_curves(const std::string& path) {
  struct stat st {};
  ZT_CHECK_AS(ErrorKind::data, ::stat(path.c_str(), &st) == 0, "[plot] no metrics file ", path, " (",
              std::strerror(errno), "); zerotrain train writes it into its run.dir");
  ZT_CHECK_AS(ErrorKind::data, S_ISREG(st.st_mode), "[plot] ", path, " is ", file_type_name(st.st_mode),
              ", not a regular file");
  std::ifstream f(path);
  ZT_CHECK_AS(ErrorKind::data, f.good(), "[plot] cannot open ", path, " (", std::strerror(errno), ")");
  LossCurves c = parse_loss_curves(f);
  ZT_CHECK_AS(ErrorKind::data, !f.bad(), "[plot] reading ", path, " failed (", std::strerror(errno), ")");
  return c;
}

}  // namespace zt::apps
