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

// Nearest, ties to even, for |v| < 2^22: adding 1.5 * 2^23 leaves the integer in the low bits
// (IEEE arithmetic: the build has no -ffast-math to fold it away). Vectorises, unlike nearbyint.
constexpr float kRoundMagic = 12582912.f;

template <typename T>
void encode(const T* x, int64_t n, int bits, float* scales, uint8_t* codes) {
  const float q = float(qmax(bits));
  parallel_for(blocks_of(n), 64, [&](int64_t b0, int64_t b1) {
    float v[kQuantBlock];
    int8_t c[kQuantBlock];
    for (int64_t blk = b0; blk < b1; ++blk) {
      const int64_t begin = blk * kQuantBlock, len = std::min(n, begin + kQuantBlock) - begin;
      float amax = 0;
      bool finite = true;
      for (int64_t i = 0; i < len; ++i) {
        v[i] = load(x, begin + i);
        amax = std::max(amax, std::fabs(v[i]));
      }
      for (int64_t i = 0; i < len; ++i) finite = finite && std::isfinite(v[i]);
      scales[blk] = finite ? amax / q : NAN;
      float inv = finite && amax > 0 ? q / amax : 0.f;
      if (!std::isfinite(inv)) inv = 0.f;  // amax below q / FLT_MAX: the block rounds to zeros
      for (int64_t i = 0; i < len; ++i)  // |v * inv| <= q: the magic rounding applies
        c[i] = int8_t(int(((finite ? v[i] * inv : 0.f) + kRoundMagic) - kRoundMagic));
      if (bits == 8) {
        std::memcpy(codes + begin, c, size_t(len));
      } else {  // blocks hold an even count of values, so each starts on a whole byte
        uint8_t* dst = codes + begin / 2;
        for (int64_t i = 0; i + 1 < len; i += 2) dst[i / 2] = uint8_t((c[i] & 0xF) | ((c[i + 1] & 0xF) << 4));
        if (len % 2) dst[len / 2] = uint8_t(c[len - 1] & 0xF);
      }
    }
  });
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
      const float scale = scales[blk];
      if (bits == 8) {
        for (int64_t i = begin; i < end; ++i) put(i, float(int8_t(codes[i])) * scale);
      } else {
        auto value = [scale](int nib) { return float(nib - ((nib & 8) << 1)) * scale; };  // sign-extended
        for (int64_t i = begin; i < end; i += 2) {  // blocks start on whole bytes
          const uint8_t byte = codes[i / 2];
          put(i, value(byte & 0xF));
          if (i + 1 < end) put(i + 1, value(byte >> 4));
        }
      }
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
