#pragma once
// Errors: bad input throws zt::Error with a "[component] what and where" message and a kind
// that callers (the CLI, tests) switch on instead of reading the message text.
// Internal invariants use ZT_ASSERT, which also throws (library code never exits).
#include <sstream>
#include <stdexcept>
#include <string>

namespace zt {

// What went wrong, by who must act: the user's input (config, data, checkpoint), the job's
// peers (comm), the machine (out_of_memory), or us (internal); invalid_argument for misuse
// of an API by a caller that is not a user-facing parser.
enum class ErrorKind { invalid_argument, config, data, comm, checkpoint, out_of_memory, internal };
const char* error_kind_name(ErrorKind k);

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& msg, ErrorKind kind = ErrorKind::invalid_argument)
      : std::runtime_error(msg), kind_(kind) {}
  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

// Raised alike on every rank of a group after the ranks agreed on it in a collective (a vote,
// or a failed checkpoint step whose first message all ranks share): the CLI says it once, on
// rank 0, and every rank exits with exit_code() without aborting the job (Note [agreed stops]).
class AgreedError : public Error {
 public:
  AgreedError(const std::string& msg, ErrorKind kind, int exit_code = 1) : Error(msg, kind), exit_code_(exit_code) {}
  int exit_code() const { return exit_code_; }  // 1, or 128 + the signal (143 for SIGTERM)
  bool interrupted() const { return exit_code_ > 128; }

 private:
  int exit_code_;
};

namespace detail {
template <typename... Args>
std::string concat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
[[noreturn]] void throw_error(const std::string& msg);
[[noreturn]] void throw_error(ErrorKind kind, const std::string& msg);
[[noreturn]] void throw_assert(const char* cond, const char* file, int line, const std::string& msg);
}  // namespace detail

}  // namespace zt

// ZT_CHECK(cond, "[component] ", parts...) : stream-concatenates the message parts.
#define ZT_CHECK(cond, ...)                                                    \
  do {                                                                         \
    if (!(cond)) ::zt::detail::throw_error(::zt::detail::concat(__VA_ARGS__)); \
  } while (0)

// ZT_CHECK_AS(ErrorKind::data, cond, "[component] ", parts...) : the same with a kind.
#define ZT_CHECK_AS(kind, cond, ...)                                                   \
  do {                                                                                 \
    if (!(cond)) ::zt::detail::throw_error((kind), ::zt::detail::concat(__VA_ARGS__)); \
  } while (0)

#define ZT_THROW(...) ::zt::detail::throw_error(::zt::detail::concat(__VA_ARGS__))
#define ZT_THROW_AS(kind, ...) ::zt::detail::throw_error((kind), ::zt::detail::concat(__VA_ARGS__))

#define ZT_ASSERT(cond, ...)                                                                                     \
  do {                                                                                                           \
    if (!(cond)) ::zt::detail::throw_assert(#cond, __FILE__, __LINE__, ::zt::detail::concat("", ##__VA_ARGS__)); \
  } while (0)
