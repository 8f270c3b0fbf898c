#pragma once
// The CPU backend: one kernel per op. Callers (the contracts in src/ops/*.cpp) have validated
// the arguments, made inputs contiguous (matmul takes strided views) and allocated outputs;
// kernels only compute. 16-bit floats compute in f32 and round once on the way out.
#include <cstdint>
#include <vector>

#include "../kernel_table.h"
#include "zt/core/tensor.h"

namespace zt::ops::cpu {

using kern::Binary;
using kern::ConvGeometry;
using kern::Unary;

// Every kernel of the table (Note [kernel contracts] in kernel_table.h), one file a family:
// matmul.cpp, elementwise.cpp, reduce.cpp, softmax.cpp (in f32), embedding.cpp, layer_norm.cpp,
// dropout.cpp, attention.cpp (flash style, f32 blocks), llama_ops.cpp, precision.cpp, conv.cpp
// (oneDNN primitives cached by geometry and dtype), pool.cpp, update.cpp, compress.cpp.
ZT_KERNELS(ZT_DECLARE_KERNEL)

// ---- matrix products (matmul.cpp): out = op(a) @ op(b) (+ bias), 2-D or batched 3-D ----
bool matmul_native(DType dt);
void set_matmul_lowp_fallback(bool force);
bool matmul_lowp_fallback();  // forced (Note [16-bit products]: the f32 path)
bool cpu_has_amx();
int64_t matmul_fallback_count();
size_t matmul_cache_size();

}  // namespace zt::ops::cpu
