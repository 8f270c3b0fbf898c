#pragma once
// oneDNN's engine, stream and data types, shared by the CPU kernels that use it (matmul, conv):
// one engine per process, one stream per thread.
#include <oneapi/dnnl/dnnl.hpp>

#include <atomic>

#include "zt/core/dtype.h"

namespace zt::ops::cpu {

inline dnnl::engine& dnnl_engine() {
  static dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  return eng;
}

// A stream is not for two threads at once, and the CPU kernels run on the sim device's stream
// thread too (Note [sim device]).
inline dnnl::stream& dnnl_stream() {
  static thread_local dnnl::stream s(dnnl_engine());
  return s;
}

// Part of every primitive cache key: oneDNN's library-managed scratchpad is per thread and grown
// when a primitive is made, so a primitive runs only on the thread that made it (one made on the
// main thread faults on the sim stream's thread).
inline int64_t dnnl_thread_slot() {
  static std::atomic<int64_t> next{0};
  static thread_local const int64_t slot = next++;
  return slot;
}

inline dnnl::memory::data_type dnnl_type(DType dt) {
  switch (dt) {
    case DType::bf16:
      return dnnl::memory::data_type::bf16;
    case DType::f16:
      return dnnl::memory::data_type::f16;
    default:
      return dnnl::memory::data_type::f32;
  }
}

}  // namespace zt::ops::cpu
