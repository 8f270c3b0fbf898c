#pragma once
// Runs fn, which must throw zt::Error, and returns its message or its kind (a test failure if
// it doesn't throw).
#include <gtest/gtest.h>

#include <ostream>
#include <string>

#include "zt/core/error.h"

namespace zt {
// gtest prints an ErrorKind by name in failures (found by argument-dependent lookup).
inline void PrintTo(ErrorKind k, std::ostream* os) { *os << error_kind_name(k); }
}  // namespace zt

namespace zt::testing_util {

template <typename Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected zt::Error";
  return "";
}

template <typename Fn>
ErrorKind error_kind_of(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.kind();
  }
  ADD_FAILURE() << "expected zt::Error";
  return ErrorKind::internal;  // no kind a test expects from a parser
}

}  // namespace zt::testing_util
