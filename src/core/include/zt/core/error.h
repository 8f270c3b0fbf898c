#pragma once
// Errors: bad input throws zt::Error with a "[component] what and where" message.
// Internal invariants use ZT_ASSERT, which also throws (library code never exits).
#include <sstream>
#include <stdexcept>
#include <string>

namespace zt {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& msg) : std::runtime_error(msg) {}
};

namespace detail {
template <typename... Args>
std::string concat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
[[noreturn]] void throw_error(const std::string& msg);
[[noreturn]] void throw_assert(const char* cond, const char* file, int line, const std::string& msg);
}  // namespace detail

}  // namespace zt

// ZT_CHECK(cond, "[component] ", parts...) : stream-concatenates the message parts.
#define ZT_CHECK(cond, ...)                                               \
  do {                                                                    \
    if (!(cond)) ::zt::detail::throw_error(::zt::detail::concat(__VA_ARGS__)); \
  } while (0)

#define ZT_THROW(...) ::zt::detail::throw_error(::zt::detail::concat(__VA_ARGS__))

#define ZT_ASSERT(cond, ...)                                                          \
  do {                                                                                \
    if (!(cond))                                                                      \
      ::zt::detail::throw_assert(#cond, __FILE__, __LINE__, ::zt::detail::concat("", ##__VA_ARGS__)); \
  } while (0)
