#pragma once
// The IDX targets' one check (raw and gzip): every rejection is a data error, and an accepted
// file holds exactly the bytes its header promises.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "zt/core/error.h"
#include "zt/data/mnist.h"

namespace zt::fuzz {

inline void check_idx_file(const std::string& path) {
  try {
    const data::IdxArray a = data::read_idx(path);
    int64_t items = 1;
    for (int64_t d : a.dims)
      if (d < 0 || __builtin_mul_overflow(items, d, &items)) std::abort();
    if (a.dims.empty() || uint64_t(items) != a.bytes.size()) std::abort();
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::data) std::abort();
  }
}

}  // namespace zt::fuzz
