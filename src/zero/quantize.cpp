#include "quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "zt/core/error.h"
#include "zt/core/parallel.h"

namespace zt::zero {

namespace {

int qmax(int bits) { return bits == 4 ? 7 : 127; }

int64_t blocks_of(int64_t n) { return (n + kQuantBlock - 1) / kQuantBlock; }

int64_t code_bytes(int64_t n, int bits) { return bits == 4 ? (n + 1) / 2 : n; }

void check_bits(int bits) { ZT_CHECK(bits == 4 || bits == 8, "[zero] quantization takes 4 or 8 bits, got ", bits); }

template <typename T>
float load(const T* p, int64_t i) {
  if constexpr (std::is_same_v<T, float>)
    return p[i];
  else if constexpr (std::is_same_v<T, bf16>)
    return bf16_to_float(p[i]);
  else
    return f16_to_float(p[i]);
}

template <typename T>
void store(T* p, int64_t i, float v) {
  if constexpr (std::is_same_v<T, float>)
    p[i] = v;
  else if constexpr (std::is_same_v<T, bf16>)
    p[i] = float_to_bf16(v);
  else
    p[i] = float_to_f16(v);
}

template <typename T>
void encode(const T* x, int64_t n, int bits, float* scales, uint8_t* codes) {
  const float q = float(qmax(bits));
  parallel_for(blocks_of(n), 64, [&](int64_t b0, int64_t b1) {
    for (int64_t blk = b0; blk < b1; ++blk) {
      const int64_t begin = blk * kQuantBlock, end = std::min(n, begin + kQuantBlock);
      float amax = 0;
      bool finite = true;
      for (int64_t i = begin; i < end; ++i) {
        const float v = load(x, i);
        finite = finite && std::isfinite(v);
        amax = std::max(amax, std::fabs(v));
      }
      scales[blk] = finite ? amax / q : NAN;
      const float inv = finite && amax > 0 ? q / amax : 0.f;
      for (int64_t i = begin; i < end; ++i) {
        const int c = finite ? int(std::nearbyint(std::clamp(load(x, i) * inv, -q, q))) : 0;
        if (bits == 8) {
          codes[i] = uint8_t(int8_t(c));
        } else {
          const uint8_t nib = uint8_t(c & 0xF);
          codes[i / 2] = (i % 2 == 0) ? uint8_t((codes[i / 2] & 0xF0) | nib) : uint8_t((codes[i / 2] & 0x0F) | (nib << 4));
        }
      }
    }
  });
}

int code_at(const uint8_t* codes, int64_t i, int bits) {
  if (bits == 8) return int(int8_t(codes[i]));
  const int nib = (i % 2 == 0) ? (codes[i / 2] & 0xF) : (codes[i / 2] >> 4);
  return nib >= 8 ? nib - 16 : nib;  // sign-extend
}

// Calls put(i, value) for every element, blocks in parallel.
template <typename Put>
void decode(const Tensor& packet, int64_t n, int bits, Put put) {
  check_bits(bits);
  ZT_CHECK(packet.dtype() == DType::i32 && packet.numel() == packet_words(n, bits), "[zero] a packet of ", n,
           " values at ", bits, " bits has ", packet_words(n, bits), " i32 words, got ", packet.numel(), " ",
           dtype_name(packet.dtype()));
  const auto* scales = static_cast<const float*>(packet.raw_data());
  const auto* codes = reinterpret_cast<const uint8_t*>(scales + blocks_of(n));
  parallel_for(blocks_of(n), 64, [&](int64_t b0, int64_t b1) {
    for (int64_t blk = b0; blk < b1; ++blk) {
      const int64_t begin = blk * kQuantBlock, end = std::min(n, begin + kQuantBlock);
      for (int64_t i = begin; i < end; ++i) put(i, float(code_at(codes, i, bits)) * scales[blk]);
    }
  });
}

}  // namespace

int64_t packet_words(int64_t n, int bits) {
  check_bits(bits);
  return (blocks_of(n) * 4 + code_bytes(n, bits) + 3) / 4;
}

void quantize_into(const Tensor& x, int bits, Tensor packet) {
  const int64_t n = x.numel();
  ZT_CHECK(x.is_contiguous() && is_floating(x.dtype()), "[zero] quantize needs a contiguous floating tensor");
  ZT_CHECK(packet.dtype() == DType::i32 && packet.numel() == packet_words(n, bits) && packet.is_contiguous(),
           "[zero] quantize: the packet of ", n, " values needs ", packet_words(n, bits), " i32 words");
  auto* scales = static_cast<float*>(packet.raw_data());
  auto* codes = reinterpret_cast<uint8_t*>(scales + blocks_of(n));
  std::memset(codes, 0, size_t(packet.nbytes()) - size_t(blocks_of(n)) * 4);  // nibbles and the padding
  switch (x.dtype()) {
    case DType::f32:
      return encode(x.data<float>(), n, bits, scales, codes);
    case DType::bf16:
      return encode(x.data<bf16>(), n, bits, scales, codes);
    case DType::f16:
      return encode(x.data<f16>(), n, bits, scales, codes);
    default:
      break;
  }
}

void dequantize_into(const Tensor& packet, int bits, Tensor out) {
  ZT_CHECK(out.is_contiguous() && is_floating(out.dtype()), "[zero] dequantize needs a contiguous floating output");
  const int64_t n = out.numel();
  switch (out.dtype()) {
    case DType::f32:
      return decode(packet, n, bits, [p = out.data<float>()](int64_t i, float v) { store(p, i, v); });
    case DType::bf16:
      return decode(packet, n, bits, [p = out.data<bf16>()](int64_t i, float v) { store(p, i, v); });
    case DType::f16:
      return decode(packet, n, bits, [p = out.data<f16>()](int64_t i, float v) { store(p, i, v); });
    default:
      break;
  }
}

void dequantize_add(const Tensor& packet, int bits, Tensor acc) {
  ZT_CHECK(acc.is_contiguous() && acc.dtype() == DType::f32, "[zero] dequantize_add accumulates into f32");
  float* p = acc.data<float>();
  decode(packet, acc.numel(), bits, [p](int64_t i, float v) { p[i] += v; });
}

}  // namespace zt::zero
