#pragma once
// Note [block quantization]: ZeRO++'s wire format for stage 3's weights (int8) and for gradients
// (int4 or int8). Values go in blocks of kQuantBlock, each symmetric around zero with one f32
// scale (its largest magnitude over 127, or over 7), rounded to nearest. A packet is the scales,
// then the codes (int4: two per byte, the even element in the low nibble), padded to whole i32
// words, the dtype it travels in. A block holding a non-finite value decodes to NaN throughout,
// so fp16's overflow check still sees it.
#include <cstdint>

#include "zt/core/tensor.h"

namespace zt::zero {

constexpr int64_t kQuantBlock = 256;

int64_t packet_words(int64_t n, int bits);  // i32 words of the packet of n values
// Encodes x (f32, bf16 or f16, contiguous; n = x.numel()) into packet (i32, packet_words(n)).
void quantize_into(const Tensor& x, int bits, Tensor packet);
// out = the n values of packet (out: f32, bf16 or f16, n elements; 16-bit rounds once).
void dequantize_into(const Tensor& packet, int bits, Tensor out);
// acc += the values of packet (acc: f32).
void dequantize_add(const Tensor& packet, int bits, Tensor acc);

}  // namespace zt::zero
