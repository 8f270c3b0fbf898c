#pragma once
// The loss curves in a run's metrics.jsonl (train.cpp appends one JSON object per line): train
// loss from records with "step" and "loss", validation loss from "step" and "val_loss".
//
// Note [resumed runs]: a resumed run (or a new run in the same folder) appends after the old
// records, beginning with an {"event": "start"} record. The first step it logs, s, replaces the
// old trajectory from s on: both curves drop their points at steps >= s, so a run resumed from
// an earlier checkpoint shows the path that continued, not both. Within a run, a step at or
// before the last one does the same (the newest record wins). Lines that are not JSON objects
// (a line torn by a kill) are skipped and counted; a null loss (NaN is written as null) is skipped.
#include <cstdint>
#include <istream>
#include <string>
#include <vector>

namespace zt::apps {

struct LossPoint {
  int64_t step;
  double loss;
};

struct LossCurves {
  std::vector<LossPoint> train, val;  // ascending steps
  int64_t runs = 0;                   // "start" records seen
  int64_t skipped_lines = 0;          // not a JSON object
};

LossCurves parse_loss_curves(std::istream& in);
// ErrorKind::data naming the file when it is missing or cannot be read.
LossCurves read_loss_curves(const std::string& path);

}  // namespace zt::apps
