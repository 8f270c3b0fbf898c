#pragma once
// The repository's root, for fixtures: $ZT_SOURCE_DIR where set (a test binary carried to another
// machine by scripts/gpu_check.sh), else the tree it was built from.
#include <cstdlib>
#include <string>

namespace zt::testing_util {

inline std::string source_dir() {
  const char* e = std::getenv("ZT_SOURCE_DIR");
  return e && *e ? std::string(e) : std::string(ZT_SOURCE_DIR);
}

}  // namespace zt::testing_util
