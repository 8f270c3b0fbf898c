#pragma once
// The CUDA backend's kernels: the same contract as the CPU's (cpu/kernels.h, Note [kernel
// table]): arguments validated, inputs contiguous (matmul: possibly transposed views), outputs
// allocated on the same GPU; tensors' raw_data() are device pointers. Every kernel is enqueued
// on the device's current stream (zt::cuda_stream) and returns without synchronising, except
// those that return a host value (sum_all, sum_of_squares, has_nonfinite, touched_rows), which
// wait for their own result. 16-bit floats compute in f32 and round once, as on the CPU.
#include <cstdint>
#include <vector>

#include "../kernel_table.h"
#include "zt/core/tensor.h"

namespace zt::ops::cuda {

using kern::Binary;
using kern::ConvGeometry;
using kern::Unary;

// Every kernel of the table (Note [kernel contracts] in kernel_table.h), one file a family:
// matmul.cu (cuBLASLt; bf16/f16 on tensor cores with f32 accumulation), elementwise.cu,
// reduce.cu, softmax.cu (and the fused cross-entropy), transformer.cu (embedding, layer norm,
// dropout with the CPU's mask, Note [dropout mask]), attention.cu (blocked, online softmax),
// llama_ops.cu, precision.cu, conv.cu (cuDNN, and max pooling), update.cu, compress.cu.
// Known deviation: a 16-bit conv2d with a bias rounds twice (cuDNN's output, then the bias add)
// where oneDNN rounds once: up to one ulp apart, within the op table's bf16/f16 tolerances.
ZT_KERNELS(ZT_DECLARE_KERNEL)

}  // namespace zt::ops::cuda
