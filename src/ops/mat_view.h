#pragma once
// The logical matrix view both backends' matmul kernels read their operands through (inline and
// host-only, so cpu/matmul.cpp and cuda/matmul.cu share one definition).
#include <cstdint>
#include <utility>

#include "zt/core/tensor.h"

namespace zt::ops::detail {

// A (batch x rows x cols) view of a 2-D or 3-D tensor: elem(b, r, c) at b*sb + r*sr + c*sc.
struct Mat {
  Tensor t;
  int64_t b = 1, r = 0, c = 0, sb = 0, sr = 0, sc = 0;
};

// op(t) as a Mat: `trans` swaps rows and columns without moving data.
inline Mat describe(const Tensor& t, bool trans) {
  Mat m;
  m.t = t;
  const bool three = t.dim() == 3;
  const auto& sh = t.shape();
  const auto& st = t.strides();
  const size_t o = three ? 1 : 0;
  m.b = three ? sh[0] : 1;
  m.r = sh[o];
  m.c = sh[o + 1];
  m.sr = st[o];
  m.sc = st[o + 1];
  if (trans) {
    std::swap(m.r, m.c);
    std::swap(m.sr, m.sc);
  }
  // Strides of size-1 dims are arbitrary; give them natural values so layouts look plain.
  if (m.c == 1) m.sc = 1;
  if (m.r == 1) m.sr = m.sc == 1 ? m.c : 1;
  m.sb = three && m.b > 1 ? st[0] : m.r * m.c;
  return m;
}

}  // namespace zt::ops::detail
