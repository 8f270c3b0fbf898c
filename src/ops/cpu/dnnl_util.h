#pragma once
// oneDNN's engine, stream and data types, shared by the CPU kernels that use it (matmul, conv):
// one engine and one stream per process.
#include <oneapi/dnnl/dnnl.hpp>

#include "zt/core/dtype.h"

namespace zt::ops::cpu {

inline dnnl::engine& dnnl_engine() {
  static dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  return eng;
}

inline dnnl::stream& dnnl_stream() {
  static dnnl::stream s(dnnl_engine());
  return s;
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
