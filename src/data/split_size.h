#pragma once
// Private to zt_data: the memory a split's tensors need, checked against the budget before
// anything is read and again when allocating, with one message for every loader.
#include <cstddef>
#include <cstdint>
#include <string>

#include "zt/data/mnist.h"

namespace zt::data::detail {

struct SplitSize {
  std::string split, dir;  // for messages: "the train split in DIR"
  int64_t n = 0, features = 0;

  size_t bytes() const;  // f32 images + i32 labels, SIZE_MAX when that overflows
  // ErrorKind::out_of_memory when the budget leaves less than bytes().
  void check_budget() const;
  // images [n, features] f32 and labels [n] i32 (tag workspace), uninitialised; the same error
  // when the allocation fails.
  Dataset allocate() const;
  [[noreturn]] void too_big(const std::string& detail) const;
};

}  // namespace zt::data::detail
