// metrics.jsonl as `zerotrain plot` reads it (Note [resumed runs]). Nothing may throw, and
// each curve's steps must come out strictly ascending whatever the lines say.
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>

#include "loss_curves.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  const zt::apps::LossCurves c = zt::apps::parse_loss_curves(in);
  for (const auto* curve : {&c.train, &c.val})
    for (size_t i = 1; i < curve->size(); ++i)
      if ((*curve)[i - 1].step >= (*curve)[i].step) std::abort();
  if (c.runs < 0 || c.skipped_lines < 0) std::abort();
  return 0;
}
