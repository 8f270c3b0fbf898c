#pragma once
// Runs fn, which must throw zt::Error, and returns its message (a test failure if it doesn't).
#include <gtest/gtest.h>

#include <string>

#include "zt/core/error.h"

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

}  // namespace zt::testing_util
