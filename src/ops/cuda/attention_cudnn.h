#pragma once
// cuDNN's fused flash attention (Note [cudnn attention] in attention_cudnn.cpp), declared in plain
// C++ for the host-compiled attention_cudnn.cpp and for attention_common.cuh, whose forward_cudnn
// and backward_cudnn pass a Ctx's device and stream on to these.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "../attention_geometry.h"
#include "zt/core/tensor.h"

namespace zt::ops::cuda::attn {

// One call's shapes (the CPU's too).
using Geo = kern::AttentionGeometry;

// Each sequence's query and key lengths on the device, i32 [B] each, for cuDNN's padding mask
// where a key mask is given (Note [cudnn padding mask] in attention_cudnn.cpp); null without one.
struct SeqLengths {
  const int32_t* q = nullptr;
  const int32_t* kv = nullptr;
};

// Why cuDNN's attention does not take this call (dtype, head size, cuDNN's version, ...), or nullptr
// where it does; the same answer for a forward and its backward.
const char* cudnn_refusal(const Geo& g, DType dt);

// The forward (out, lse) and backward (dqkv, written whole) through cuDNN on `dev`'s `stream`,
// that device current; false (nothing enqueued) where cuDNN does not take the call. The backward
// runs only where the forward of the same shape did, since it reads cuDNN's own Stats as lse.
// With a key mask, `len` holds the sequences' lengths (every sequence is run as right padding).
bool forward_cudnn_on(const Tensor& qkv, const Geo& g, const SeqLengths& len, Tensor& out, Tensor& lse, Device dev,
                      cudaStream_t stream);
bool backward_cudnn_on(const Tensor& dout, const Tensor& qkv, const Tensor& out, const Tensor& lse, const Geo& g,
                       const SeqLengths& len, Tensor& dqkv, Device dev, cudaStream_t stream);

}  // namespace zt::ops::cuda::attn
