#include "zt/core/error.h"

namespace zt {

const char* error_kind_name(ErrorKind k) {
  switch (k) {
    case ErrorKind::invalid_argument:
      return "invalid_argument";
    case ErrorKind::config:
      return "config";
    case ErrorKind::data:
      return "data";
    case ErrorKind::comm:
      return "comm";
    case ErrorKind::checkpoint:
      return "checkpoint";
    case ErrorKind::out_of_memory:
      return "out_of_memory";
    case ErrorKind::internal:
      return "internal";
  }
  return "unknown";
}

namespace detail {

void throw_error(const std::string& msg) { throw Error(msg); }
void throw_error(ErrorKind kind, const std::string& msg) { throw Error(msg, kind); }

void throw_assert(const char* cond, const char* file, int line, const std::string& msg) {
  throw Error(concat("[internal] assertion failed: ", cond, " at ", file, ":", line, msg.empty() ? "" : " — ", msg),
              ErrorKind::internal);
}

}  // namespace detail
}  // namespace zt
