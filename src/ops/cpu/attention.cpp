// CPU scaled dot-product attention, flash style (Note [flash attention on the CPU]).
// Note [flash attention on the CPU]: each (batch, head, block of kBq queries) walks the blocks
// of kBk keys with an online softmax (running max m and sum l), so no T x T scores exist;
// backward recomputes P = exp(S - lse) per block pair (FlashAttention-2). Blocks are converted
// to f32 scratch (per thread, sized by the blocks), K (and V in backward) transposed, so each
// loop runs over a contiguous row of 64 keys or D features (Note [block products]). Each output
// row is written by one work item in a fixed summation order: results do not depend on threads.
// With grouped-query attention the G = H / K query heads of a key/value head read its k and v in
// place; its dK and dV sum over the group's heads in head order.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

#include "../attention_geometry.h"
#include "common.h"
#include "kernels.h"

namespace zt::ops::cpu {

using detail::dispatch_float;
using detail::exp_approx;

namespace {

constexpr int64_t kBq = 64, kBk = 64;  // queries, keys per block
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

int64_t blocks(int64_t t, int64_t b) { return (t + b - 1) / b; }

// One call's shapes and inputs (kern::AttentionGeometry), with the CPU's row and block arithmetic.
struct Geometry : kern::AttentionGeometry {
  int64_t row(int64_t b, int64_t t) const { return (b * T + t) * W; }
  int64_t nqb() const { return blocks(T, kBq); }
  int64_t nkb() const { return blocks(T, kBk); }
  // Key blocks a query block [i0, i0+ni) sees: all, or up to its last query's block.
  int64_t kb_end(int64_t i0, int64_t ni) const { return causal ? (i0 + ni - 1) / kBk + 1 : nkb(); }
};

// Per-thread f32 scratch, carved from one workspace tensor per call.
struct Scratch {
  float *q, *dout, *k, *kt, *v, *vt, *s, *dp, *acc, *dk, *dv, *m, *l, *dvec, *bias, *row;
  static int64_t floats(int64_t d, int64_t acc_rows) {
    return 2 * kBq * d + 6 * kBk * d + 2 * kBq * kBk + acc_rows * d + 3 * kBq + kBk + d;
  }
  Scratch(float* p, int64_t d, int64_t acc_rows) {
    auto take = [&p](int64_t n) { return std::exchange(p, p + n); };
    q = take(kBq * d), dout = take(kBq * d), k = take(kBk * d), kt = take(kBk * d), v = take(kBk * d);
    vt = take(kBk * d), s = take(kBq * kBk), dp = take(kBq * kBk), acc = take(acc_rows * d);
    dk = take(kBk * d), dv = take(kBk * d), m = take(kBq), l = take(kBq), dvec = take(kBq), bias = take(kBk);
    row = take(d);
  }
};

// Threads worth starting for n items of `work` multiply-adds each: a parallel region costs
// microseconds, so tiny calls (gradient checks, short sequences) run on one.
int threads_for(int64_t n, int64_t work) {
  const int64_t by_work = std::max<int64_t>(1, n * work / (int64_t(1) << 18));
  return int(std::min<int64_t>({int64_t(num_threads()), n, by_work}));
}

// Runs fn(item, scratch) for items [0, n); causal items differ in cost, hence dynamic.
template <typename Fn>
void for_items(int64_t n, int64_t work, int64_t d, int64_t acc_rows, Fn&& fn) {
  const int64_t per = Scratch::floats(d, acc_rows);
  const int nt = std::max(1, threads_for(n, work));
  Tensor ws = Tensor::empty({nt * per}, DType::f32, MemTag::workspace);
  float* base = ws.data<float>();
#pragma omp parallel for schedule(dynamic) num_threads(nt) if (nt > 1)
  for (int64_t it = 0; it < n; ++it) {
    Scratch sc(base + omp_get_thread_num() * per, d, acc_rows);
    fn(it, sc);
  }
}

// n rows (row stride `stride`) of d values into dst [n][d] as f32, times s.
template <typename T>
void load_rows(const T* src, int64_t stride, int64_t n, int64_t d, float s, float* dst) {
  for (int64_t r = 0; r < n; ++r) {
    float* __restrict o = dst + r * d;
    to_f32(src + r * stride, o, d);
    if (s != 1.f)
      for (int64_t c = 0; c < d; ++c) o[c] *= s;
  }
}

// n rows of d values transposed into dst [d][kBk], zero past row n.
template <typename T>
void load_cols(const T* src, int64_t stride, int64_t n, int64_t d, float* row, float* __restrict dst) {
  for (int64_t r = 0; r < kBk; ++r) {
    const float* x = r < n ? as_f32(src + r * stride, row, d) : nullptr;
    for (int64_t c = 0; c < d; ++c) dst[c * kBk + r] = x ? x[c] : 0.f;
  }
}

// 0 for the keys of [j0, j0+nj) a query may see, -inf for padding and past the end; false when none.
bool key_bias(const Geometry& g, int64_t b, int64_t j0, int64_t nj, float* bias) {
  bool any = false;
  for (int64_t j = 0; j < kBk; ++j) {
    const bool vis = j < nj && (!g.mask || g.mask[b * g.T + j0 + j] != 0);
    bias[j] = vis ? 0.f : kNegInf;
    any |= vis;
  }
  return any;
}

// Note [block products]: every product here is acc[m][ncols] += W Y, W[r][k] at w[r*wr + k*wk]
// and row k of Y at y + k*ldy (W = P, dS, Q or their transposes by the strides). Tiles of 4 rows
// by up to 64 columns stay in 16 vector registers while k runs, so each W value is broadcast
// once and each Y vector loaded once per 4 rows. GCC's vector extension, no intrinsics.
constexpr int64_t kW = 16;  // floats per vector
typedef float Vec __attribute__((vector_size(kW * sizeof(float))));

// Through a reference: a function returning a 64-byte vector changes the ABI where AVX-512 is not
// enabled (GCC's -Wpsabi in the sanitizer build, which has no -march=native).
inline void vload(Vec& v, const float* p) { std::memcpy(&v, p, sizeof v); }
inline void vstore(float* p, const Vec& v) { std::memcpy(p, &v, sizeof v); }

template <int R, int V>
void mm_tile(const float* w, int64_t wr, int64_t wk, const float* y, int64_t ldy, int64_t nk, float* acc, int64_t lda) {
  Vec a[R][V];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < V; ++v) vload(a[r][v], acc + r * lda + v * kW);
  for (int64_t k = 0; k < nk; ++k) {
    Vec yv[V];
    for (int v = 0; v < V; ++v) vload(yv[v], y + k * ldy + v * kW);
    for (int r = 0; r < R; ++r) {
      const float x = w[r * wr + k * wk];
      for (int v = 0; v < V; ++v) a[r][v] += x * yv[v];
    }
  }
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < V; ++v) vstore(acc + r * lda + v * kW, a[r][v]);
}

template <int R>
void mm_rows(const float* w, int64_t wr, int64_t wk, const float* y, int64_t ldy, int64_t nk, float* acc, int64_t lda,
             int64_t ncols) {
  int64_t c = 0;
  for (; c + 4 * kW <= ncols; c += 4 * kW) mm_tile<R, 4>(w, wr, wk, y + c, ldy, nk, acc + c, lda);
  if (c + 2 * kW <= ncols) mm_tile<R, 2>(w, wr, wk, y + c, ldy, nk, acc + c, lda), c += 2 * kW;
  if (c + kW <= ncols) mm_tile<R, 1>(w, wr, wk, y + c, ldy, nk, acc + c, lda), c += kW;
  for (; c < ncols; ++c)  // fewer than kW columns left (small heads)
    for (int r = 0; r < R; ++r) {
      float s = acc[r * lda + c];
      for (int64_t k = 0; k < nk; ++k) s += w[r * wr + k * wk] * y[k * ldy + c];
      acc[r * lda + c] = s;
    }
}

// Note [block products].
void mm_acc(const float* w, int64_t wr, int64_t wk, const float* y, int64_t ldy, int64_t nk, float* acc, int64_t lda,
            int64_t m, int64_t ncols) {
  int64_t r = 0;
  for (; r + 4 <= m; r += 4) mm_rows<4>(w + r * wr, wr, wk, y, ldy, nk, acc + r * lda, lda, ncols);
  for (; r < m; ++r) mm_rows<1>(w + r * wr, wr, wk, y, ldy, nk, acc + r * lda, lda, ncols);
}

// out[i][:] = a[i] . bt[:, j] for i < n: a [n][d], bt [d][kBk], out [n][kBk].
void gemm_abt(const float* a, const float* bt, int64_t n, int64_t d, float* out) {
  std::fill(out, out + n * kBk, 0.f);
  mm_acc(a, d, 1, bt, kBk, d, out, kBk, n, kBk);
}

// acc[i][:] += sum_j w[i][j] * y[j][:] (O += P V, dQ += dS K): w [n][kBk], y [nj][d], acc [n][d].
void acc_wy(const float* w, const float* y, int64_t n, int64_t nj, int64_t d, float* acc) {
  mm_acc(w, kBk, 1, y, d, nj, acc, d, n, d);
}

// acc[j][:] += sum_i w[i][j] * x[i][:] (dV += P^T dO, dK += dS^T Q): w [n][kBk], x [n][d], acc [nj][d].
void acc_wtx(const float* w, const float* x, int64_t n, int64_t nj, int64_t d, float* acc) {
  mm_acc(w, 1, kBk, x, d, n, acc, d, nj, d);
}

// The largest of a row of kBk scores, and exp(s - shift) in place returning their sum: kW lanes
// of partial results, so both vectorise without fast-math.
float row_max(const float* s) {
  float m[kW];
  std::copy_n(s, kW, m);
  for (int64_t j = kW; j < kBk; j += kW)
    for (int64_t l = 0; l < kW; ++l) m[l] = std::max(m[l], s[j + l]);
  return *std::max_element(m, m + kW);
}
float exp_row(float* s, float shift) {
  float sum[kW] = {};
  for (int64_t j = 0; j < kBk; j += kW)
    for (int64_t l = 0; l < kW; ++l) sum[l] += (s[j + l] = exp_approx(s[j + l] - shift));
  float t = 0.f;
  for (float x : sum) t += x;
  return t;
}

// Scores of queries [i0, i0+n) (q scaled) against keys [j0, j0+kBk): bias added, -inf above the diagonal.
void scores(const Geometry& g, const float* q, const float* kt, const float* bias, int64_t i0, int64_t n, int64_t j0,
            float* s) {
  gemm_abt(q, kt, n, g.D, s);
  for (int64_t i = 0; i < n; ++i) {
    float* __restrict si = s + i * kBk;
    for (int64_t j = 0; j < kBk; ++j) si[j] += bias[j];
    if (g.causal)
      for (int64_t j = std::max<int64_t>(0, i0 + i - j0 + 1); j < kBk; ++j) si[j] = kNegInf;
  }
}

template <typename T>
void forward_block(const Geometry& g, const T* qkv, int64_t b, int64_t h, int64_t qb, Scratch& sc, T* out, float* lse) {
  const int64_t D = g.D, ld = g.W, i0 = qb * kBq, ni = std::min(kBq, g.T - i0);
  const T* base = qkv + g.row(b, 0);
  load_rows(base + g.q_col(h) + i0 * ld, ld, ni, D, g.scale, sc.q);
  std::fill(sc.m, sc.m + ni, kNegInf);
  std::fill(sc.l, sc.l + ni, 0.f);
  std::fill(sc.acc, sc.acc + ni * D, 0.f);
  for (int64_t kb = 0; kb < g.kb_end(i0, ni); ++kb) {
    const int64_t j0 = kb * kBk, nj = std::min(kBk, g.T - j0);
    if (!key_bias(g, b, j0, nj, sc.bias)) continue;
    load_cols(base + g.k_col(h / g.G) + j0 * ld, ld, nj, D, sc.row, sc.kt);
    load_rows(base + g.v_col(h / g.G) + j0 * ld, ld, nj, D, 1.f, sc.v);
    scores(g, sc.q, sc.kt, sc.bias, i0, ni, j0, sc.s);
    for (int64_t i = 0; i < ni; ++i) {
      float* __restrict si = sc.s + i * kBk;
      const float mb = row_max(si);
      if (mb == kNegInf) {  // no key of this block visible to query i
        std::fill(si, si + kBk, 0.f);
        continue;
      }
      const float mn = std::max(sc.m[i], mb), corr = exp_approx(sc.m[i] - mn);
      const float sum = exp_row(si, mn);
      sc.m[i] = mn;
      sc.l[i] = sc.l[i] * corr + sum;
      if (corr != 1.f)
        for (int64_t c = 0; c < D; ++c) sc.acc[i * D + c] *= corr;
    }
    acc_wy(sc.s, sc.v, ni, nj, D, sc.acc);
  }
  for (int64_t i = 0; i < ni; ++i) {
    const float l = sc.l[i], inv = l > 0.f ? 1.f / l : 0.f;  // l == 0: the query sees no key
    float* __restrict o = sc.acc + i * D;
    for (int64_t c = 0; c < D; ++c) o[c] *= inv;
    from_f32(o, out + (b * g.T + i0 + i) * g.C + h * D, D);
    lse[(b * g.H + h) * g.T + i0 + i] = l > 0.f ? sc.m[i] + std::log(l) : kNegInf;
  }
}

// Backward state of one call: inputs plus the rowsums D_i = dO_i . O_i ([B, H, T]).
template <typename T>
struct Backward {
  const Geometry& g;
  const T *qkv, *dout;
  const float *lse, *dsum;
  T* dqkv;

  const T* base(int64_t b) const { return qkv + g.row(b, 0); }
  const float* per_query(const float* p, int64_t b, int64_t h) const { return p + (b * g.H + h) * g.T; }

  // Queries [i0, i0+ni) of (b, h) into q (scaled), dout, m (lse) and dvec.
  void load_queries(int64_t b, int64_t h, int64_t i0, int64_t ni, Scratch& sc) const {
    load_rows(base(b) + g.q_col(h) + i0 * g.W, g.W, ni, g.D, g.scale, sc.q);
    load_rows(dout + (b * g.T + i0) * g.C + h * g.D, g.C, ni, g.D, 1.f, sc.dout);
    std::copy_n(per_query(lse, b, h) + i0, ni, sc.m);
    std::copy_n(per_query(dsum, b, h) + i0, ni, sc.dvec);
  }
  // Keys [j0, j0+nj) of kv head kv of batch b into k, kt and vt (and bias); false when none is visible.
  bool load_keys(int64_t b, int64_t kv, int64_t j0, int64_t nj, Scratch& sc) const {
    if (!key_bias(g, b, j0, nj, sc.bias)) return false;
    load_rows(base(b) + g.k_col(kv) + j0 * g.W, g.W, nj, g.D, 1.f, sc.k);
    load_cols(sc.k, g.D, nj, g.D, sc.row, sc.kt);  // from the f32 rows: K is converted once
    load_cols(base(b) + g.v_col(kv) + j0 * g.W, g.W, nj, g.D, sc.row, sc.vt);
    return true;
  }
  // P = exp(S - lse) into s and dS = P * (dP - D_i) into dp for the loaded blocks.
  void pair(int64_t i0, int64_t ni, int64_t j0, Scratch& sc) const {
    scores(g, sc.q, sc.kt, sc.bias, i0, ni, j0, sc.s);
    gemm_abt(sc.dout, sc.vt, ni, g.D, sc.dp);
    for (int64_t i = 0; i < ni; ++i) {
      float* __restrict p = sc.s + i * kBk;
      float* __restrict ds = sc.dp + i * kBk;
      const float lse_i = sc.m[i], d_i = sc.dvec[i];
      if (lse_i == kNegInf) {  // the query sees no key: no gradient
        std::fill(p, p + kBk, 0.f);
        std::fill(ds, ds + kBk, 0.f);
        continue;
      }
      for (int64_t j = 0; j < kBk; ++j) {
        p[j] = exp_approx(p[j] - lse_i);
        ds[j] = p[j] * (ds[j] - d_i);
      }
    }
  }
  // Rows of dqkv: n rows of d values from f32 src (times s) at dst, row stride W.
  void store(const float* src, int64_t n, float s, T* dst, float* row) const {
    for (int64_t r = 0; r < n; ++r) {
      for (int64_t c = 0; c < g.D; ++c) row[c] = src[r * g.D + c] * s;
      from_f32(row, dst + r * g.W, g.D);
    }
  }

  // dK and dV of key block kb of kv head kv over every query block of its group's heads that sees
  // it; adds dS K into dq_heads ([G][T][D], the group's heads in order) when given.
  void key_block(int64_t b, int64_t kv, int64_t kb, Scratch& sc, float* dq_heads) const {
    const int64_t D = g.D, j0 = kb * kBk, nj = std::min(kBk, g.T - j0);
    std::fill(sc.dk, sc.dk + nj * D, 0.f);
    std::fill(sc.dv, sc.dv + nj * D, 0.f);
    if (load_keys(b, kv, j0, nj, sc)) {
      for (int64_t gh = 0; gh < g.G; ++gh) {
        const int64_t h = kv * g.G + gh;
        for (int64_t qb = g.causal ? j0 / kBq : 0; qb < g.nqb(); ++qb) {
          const int64_t i0 = qb * kBq, ni = std::min(kBq, g.T - i0);
          load_queries(b, h, i0, ni, sc);
          pair(i0, ni, j0, sc);
          acc_wtx(sc.s, sc.dout, ni, nj, D, sc.dv);
          acc_wtx(sc.dp, sc.q, ni, nj, D, sc.dk);  // q is scaled: dK = scale * dS^T Q
          if (dq_heads) acc_wy(sc.dp, sc.k, ni, nj, D, dq_heads + (gh * g.T + i0) * D);
        }
      }
    }
    T* row = dqkv + g.row(b, j0);
    store(sc.dk, nj, 1.f, row + g.k_col(kv), sc.row);
    store(sc.dv, nj, 1.f, row + g.v_col(kv), sc.row);
  }

  // dQ of query block qb over every key block it sees, into sc.acc then dqkv.
  void query_block(int64_t b, int64_t h, int64_t qb, Scratch& sc) const {
    const int64_t D = g.D, i0 = qb * kBq, ni = std::min(kBq, g.T - i0);
    std::fill(sc.acc, sc.acc + ni * D, 0.f);
    load_queries(b, h, i0, ni, sc);
    for (int64_t kb = 0; kb < g.kb_end(i0, ni); ++kb) {
      const int64_t j0 = kb * kBk, nj = std::min(kBk, g.T - j0);
      if (!load_keys(b, h / g.G, j0, nj, sc)) continue;
      pair(i0, ni, j0, sc);
      acc_wy(sc.dp, sc.k, ni, nj, D, sc.acc);
    }
    store(sc.acc, ni, g.scale, dqkv + g.row(b, i0) + g.q_col(h), sc.row);
  }
};

Geometry geometry(const Tensor& qkv, int64_t n_head, int64_t n_kv_head, bool causal, const Tensor* key_mask) {
  return {kern::attention_geometry(qkv, n_head, n_kv_head, causal, key_mask ? key_mask->data<int32_t>() : nullptr)};
}

// D_i = sum_c dO[i][c] * O[i][c] per (b, h, query), in f32.
template <typename T>
void rowsums(const Geometry& g, const T* dout, const T* out, float* dsum) {
  for_items(g.B * g.T, g.C, g.D, 0, [&](int64_t r, Scratch& sc) {
    const int64_t b = r / g.T, t = r % g.T;
    for (int64_t h = 0; h < g.H; ++h) {
      const float* o = as_f32(out + r * g.C + h * g.D, sc.q, g.D);
      const float* d = as_f32(dout + r * g.C + h * g.D, sc.dout, g.D);
      float s = 0.f;
      for (int64_t c = 0; c < g.D; ++c) s += o[c] * d[c];
      dsum[(b * g.H + h) * g.T + t] = s;
    }
  });
}

}  // namespace

std::string attention_path(DType, int64_t, int64_t, int64_t, bool) { return "own flash kernels (cpu)"; }

void attention(const Tensor& qkv, int64_t n_head, int64_t n_kv_head, bool causal, const Tensor* key_mask, Tensor& out,
               Tensor& lse) {
  const Geometry g = geometry(qkv, n_head, n_kv_head, causal, key_mask);
  dispatch_float(qkv.dtype(), "attention", [&](auto tag) {
    using T = decltype(tag);
    const T* px = qkv.data<T>();
    T* po = out.data<T>();
    float* pl = lse.data<float>();
    const int64_t nqb = g.nqb();
    for_items(g.B * g.H * nqb, kBq * g.T * g.D, g.D, kBq, [&](int64_t it, Scratch& sc) {
      forward_block(g, px, it / (g.H * nqb), it / nqb % g.H, it % nqb, sc, po, pl);
    });
  });
}

// Two schedules, the same sums in the same order (so bitwise the same result): with a kv head per
// thread worth starting or more, one item per (b, kv head) walks key blocks and gathers its group's
// dQ in a [G][T][D] buffer (five block products per pair); with fewer, items per key block (dK, dV)
// and then per query block (dQ) keep every thread busy at the cost of recomputing S and dP (seven).
void attention_backward(const Tensor& dout, const Tensor& qkv, const Tensor& out, const Tensor& lse, int64_t n_head,
                        int64_t n_kv_head, bool causal, const Tensor* key_mask, Tensor& dqkv) {
  const Geometry g = geometry(qkv, n_head, n_kv_head, causal, key_mask);
  Tensor dsum = Tensor::empty({g.B, g.H, g.T}, DType::f32, MemTag::workspace);
  dispatch_float(qkv.dtype(), "attention_backward", [&](auto tag) {
    using T = decltype(tag);
    rowsums(g, dout.data<T>(), out.data<T>(), dsum.data<float>());
    const Backward<T> bw{g, qkv.data<T>(), dout.data<T>(), lse.data<float>(), dsum.data<float>(), dqkv.data<T>()};
    const int64_t heads = g.B * g.K, nqb = g.nqb(), nkb = g.nkb();
    if (heads >= threads_for(heads * nkb, kBk * g.T * g.D * g.G)) {
      for_items(heads, g.T * g.T * g.D * g.G, g.D, g.G * g.T, [&](int64_t bkv, Scratch& sc) {
        const int64_t b = bkv / g.K, kv = bkv % g.K;
        std::fill(sc.acc, sc.acc + g.G * g.T * g.D, 0.f);
        for (int64_t kb = 0; kb < nkb; ++kb) bw.key_block(b, kv, kb, sc, sc.acc);
        for (int64_t gh = 0; gh < g.G; ++gh)
          bw.store(sc.acc + gh * g.T * g.D, g.T, g.scale, dqkv.data<T>() + g.row(b, 0) + g.q_col(kv * g.G + gh),
                   sc.row);
      });
    } else {
      for_items(heads * nkb, kBk * g.T * g.D * g.G, g.D, 0,
                [&](int64_t it, Scratch& sc) { bw.key_block(it / nkb / g.K, it / nkb % g.K, it % nkb, sc, nullptr); });
      for_items(g.B * g.H * nqb, kBq * g.T * g.D, g.D, kBq,
                [&](int64_t it, Scratch& sc) { bw.query_block(it / nqb / g.H, it / nqb % g.H, it % nqb, sc); });
    }
  });
}

}  // namespace zt::ops::cpu
