#pragma once
// The kernels of ZeRO++'s compressed wire formats, in every device's table as any other op.
//
// Note [block quantization]: stage 3's weights (int8) and gradients (int4 or int8) travel in
// blocks of kQuantBlock values, each symmetric around zero with one f32 scale (its largest
// magnitude over 127, or over 7), rounded to nearest even. A packet is the scales, then the codes
// (int4: two per byte, the even element in the low nibble), padded to whole i32 words, the dtype
// it travels in. A block holding a non-finite value decodes to NaN throughout, so fp16's
// overflow check still sees it.
// The sparse rows' sum (Note [sparse rows] in src/zero/sparse_rows.h) is here as well.
#include <cstdint>

#include "zt/core/tensor.h"

namespace zt::ops {

constexpr int64_t kQuantBlock = 256;

int64_t packet_words(int64_t n, int bits);  // i32 words of the packet of n values (bits 4 or 8)
// Encodes x (f32, bf16 or f16, contiguous) into packet (i32, packet_words(x.numel()), x's device).
void quantize_into(const Tensor& x, int bits, Tensor packet);
// out = the out.numel() values of packet (out: f32, bf16 or f16; 16-bit rounds once).
void dequantize_into(const Tensor& packet, int bits, Tensor out);
// acc += the values of packet (acc: f32).
void dequantize_add(const Tensor& packet, int bits, Tensor acc);

// out (f32, the positions [dst_begin, dst_begin + out.numel()) of a flat buffer whose [V, C]
// parameter starts at `offset`) = the sum, in order, of the rows (f32 [ids.numel() * C]) placed
// at their ids (i32; -1 is padding), divided by `divisor`. A row outside [0, V) is an error.
void average_rows_into(const Tensor& ids, const Tensor& rows, int64_t offset, int64_t V, int64_t C, int64_t dst_begin,
                       float divisor, Tensor out);
// dst (f32, bf16 or f16, the same positions) += that average rounded to `wire`: the values of
// average_rows_into, cast to `wire` and added with axpy_, but only where a row lies (on the CPU:
// work in the rows' size, not the buffer's; a tied embedding's rows are a sliver of it).
void add_average_rows_into(const Tensor& ids, const Tensor& rows, int64_t offset, int64_t V, int64_t C,
                           int64_t dst_begin, float divisor, DType wire, Tensor dst);

}  // namespace zt::ops
