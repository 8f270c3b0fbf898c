#include "zt/core/error.h"

namespace zt::detail {

void throw_error(const std::string& msg) { throw Error(msg); }

void throw_assert(const char* cond, const char* file, int line, const std::string& msg) {
  throw Error(concat("[internal] assertion failed: ", cond, " at ", file, ":", line,
                     msg.empty() ? "" : " — ", msg));
}

}  // namespace zt::detail
