#pragma once
// The CPU convolutions' own switches and counters, beside their kernels (conv2d and its
// backwards, max pooling: kernels.h, as every kernel of the table).
#include <cstdint>

#include "kernels.h"

namespace zt::ops::cpu {

// ---- convolution (conv.cpp, oneDNN primitives cached by geometry and dtype) ----
bool conv_native(DType dt);
void set_conv_lowp_fallback(bool force);
bool conv_lowp_fallback();
int64_t conv_fallback_count();
size_t conv_cache_size();

}  // namespace zt::ops::cpu
