#pragma once
// cuDNN helpers shared by conv.cu (the legacy convolution API) and attention_cudnn.cpp (the
// backend graph API): a status check that throws, one handle per GPU, our dtypes as cuDNN's.
// Plain C++ (no device code), so host-compiled files include it as well as nvcc's.
#include <cudnn.h>

#include "zt/core/dtype.h"
#include "zt/core/error.h"

namespace zt::ops::cuda {

inline void dnn_check(cudnnStatus_t s, const char* what) {
  if (s != CUDNN_STATUS_SUCCESS) ZT_THROW_AS(ErrorKind::internal, "[cuda] ", what, ": ", cudnnGetErrorString(s));
}
#define ZT_DNN_CHECK(expr) ::zt::ops::cuda::dnn_check((expr), #expr)

// One handle per GPU, made on first use (its device current) and kept for the process
// (cudnn_common.cpp).
cudnnHandle_t handle_for(int index);

inline cudnnDataType_t dnn_type(DType dt) {
  switch (dt) {
    case DType::bf16:
      return CUDNN_DATA_BFLOAT16;
    case DType::f16:
      return CUDNN_DATA_HALF;
    default:
      return CUDNN_DATA_FLOAT;
  }
}

}  // namespace zt::ops::cuda
