// The CPU's kernels of ZeRO++'s wire formats (Note [block quantization] and the sparse rows' sum in
// zt/ops/compress.h): quantization blocks in parallel, each block's arithmetic in order.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "convert.h"
#include "kernels.h"
#include "zt/core/error.h"
#include "zt/core/parallel.h"
#include "zt/ops/compress.h"

namespace zt::ops::cpu {
namespace {

int64_t blocks_of(int64_t n) { return (n + kQuantBlock - 1) / kQuantBlock; }

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

// Calls fn(T{}) for the floating dtype d (the contract admits only these).
template <typename Fn>
void with_float(DType d, Fn&& fn) {
  if (d == DType::f32)
    fn(float{});
  else if (d == DType::bf16)
    fn(bf16{});
  else
    fn(f16{});
}

// Nearest, ties to even, for |v| < 2^22: adding 1.5 * 2^23 leaves the integer in the low bits
// (IEEE arithmetic: the build has no -ffast-math to fold it away). Vectorises, unlike nearbyint.
constexpr float kRoundMagic = 12582912.f;

template <typename T>
void encode(const T* x, int64_t n, int bits, float* scales, uint8_t* codes) {
  const float q = bits == 4 ? 7.f : 127.f;
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

void quantize_blocks(const Tensor& x, int bits, Tensor& packet) {
  const int64_t n = x.numel();
  auto* scales = static_cast<float*>(packet.raw_data());
  auto* codes = reinterpret_cast<uint8_t*>(scales + blocks_of(n));
  std::memset(codes, 0, size_t(packet.nbytes()) - size_t(blocks_of(n)) * 4);  // nibbles and the padding
  with_float(x.dtype(), [&](auto t) {
    using T = decltype(t);
    encode(static_cast<const T*>(x.raw_data()), n, bits, scales, codes);
  });
}

void dequantize_blocks(const Tensor& packet, int bits, bool accumulate, Tensor& out) {
  const int64_t n = out.numel();
  if (accumulate) {  // the contract admits only f32 here
    float* p = static_cast<float*>(out.raw_data());
    return decode(packet, n, bits, [p](int64_t i, float v) { p[i] += v; });
  }
  with_float(out.dtype(), [&](auto t) {
    using T = decltype(t);
    decode(packet, n, bits, [p = static_cast<T*>(out.raw_data())](int64_t i, float v) { store(p, i, v); });
  });
}

void average_rows(const Tensor& ids, const Tensor& rows, int64_t offset, int64_t V, int64_t C, int64_t dst_begin,
                  float divisor, Tensor& out) {
  const auto* id = static_cast<const int32_t*>(ids.raw_data());
  const auto* v = static_cast<const float*>(rows.raw_data());
  float* a = static_cast<float*>(out.raw_data());
  const int64_t dst_end = dst_begin + out.numel();
  std::fill(a, a + out.numel(), 0.f);
  for (int64_t i = 0; i < ids.numel(); ++i) {  // in order: each element sums its rows in rank order
    if (id[i] < 0) continue;
    ZT_CHECK(id[i] < V, "[average_rows] a peer sent row ", id[i], " of an embedding with ", V, " rows");
    const int64_t row = offset + id[i] * C;
    const int64_t b = std::max(row, dst_begin), e = std::min(row + C, dst_end);
    for (int64_t x = b; x < e; ++x) a[x - dst_begin] += v[i * C + (x - row)];
  }
  for (int64_t x = 0; x < out.numel(); ++x) a[x] /= divisor;  // an fp32 division, as comm's avg
}

// average_rows' arithmetic at the rows' positions only: each touched row once, its copies (one
// per rank that sent it) summed in the ids' order, divided, rounded to the wire, then added.
void add_average_rows(const Tensor& ids, const Tensor& rows, int64_t offset, int64_t V, int64_t C, int64_t dst_begin,
                      float divisor, DType wire, Tensor& dst) {
  const auto* id = static_cast<const int32_t*>(ids.raw_data());
  const auto* v = static_cast<const float*>(rows.raw_data());
  std::vector<int64_t> order;
  for (int64_t i = 0; i < ids.numel(); ++i) {
    if (id[i] < 0) continue;
    ZT_CHECK(id[i] < V, "[add_average_rows] a peer sent row ", id[i], " of an embedding with ", V, " rows");
    order.push_back(i);
  }
  std::stable_sort(order.begin(), order.end(), [id](int64_t a, int64_t b) { return id[a] < id[b]; });
  const int64_t dst_end = dst_begin + dst.numel();
  with_float(dst.dtype(), [&](auto t) {
    using T = decltype(t);
    T* d = static_cast<T*>(dst.raw_data());
    for (size_t g = 0, h = 0; g < order.size(); g = h) {
      while (h < order.size() && id[order[h]] == id[order[g]]) ++h;
      const int64_t row = offset + int64_t(id[order[g]]) * C;
      for (int64_t x = std::max(row, dst_begin); x < std::min(row + C, dst_end); ++x) {
        float s = 0.f;
        for (size_t j = g; j < h; ++j) s += v[order[j] * C + (x - row)];
        s /= divisor;
        round_to(wire, &s, 1);
        store(d, x - dst_begin, load(d, x - dst_begin) + s);
      }
    }
  });
}

}  // namespace zt::ops::cpu
