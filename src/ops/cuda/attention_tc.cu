// Tensor-core attention for 16-bit q, k, v (Note [tensor-core attention]): the SIMT tiles of
// attention.cu with their products on WMMA 16x16x16 fragments (f32 accumulators), for head sizes
// 16, 32, 64 and 128; other shapes and f32 stay on the SIMT kernels.
#include <mma.h>

#include "attention_common.cuh"

namespace zt::ops::cuda::attn {

namespace {

namespace wmma = nvcuda::wmma;

// Note [tensor-core attention]: a block of 4 warps owns 64 rows (queries; keys in dK/dV), 16 per
// warp, and walks the other side in tiles of 64. Each warp's 16 x 64 scores come from fragments
// into shared f32, where lane pair (2r, 2r+1) takes row r's 64 columns for the softmax (or the
// backward's P and dS), which go back to shared as 16-bit for the next product. The forward keeps
// the unnormalised output in shared f32 (rescaled per row as the running max moves); the backward
// keeps dQ, dK and dV in fragments (plain sums). dS is rounded to 16 bits before its products, as
// FlashAttention does. Grouped-query attention: a query head reads its kv head's tiles in place; a
// dK/dV block of a kv head walks its group's query heads in order (the same sums as multi-head
// attention's when each group is one head).
constexpr int kRows = 64, kWarps = 4, kThreadsTc = kWarps * 32, kF = 16;
constexpr int kLs = kRows + 4;  // f32 scores' row stride (WMMA wants a multiple of 4 floats)
constexpr int kLp = kRows + 8;  // 16-bit probabilities' row stride (a multiple of 8 elements)

template <int D>
__host__ __device__ constexpr int ld_tile() {
  return D + 8;  // 16-bit q/k/v/dO tiles' row stride: 16-byte rows, shifted banks
}

template <typename T>
using FragA = wmma::fragment<wmma::matrix_a, kF, kF, kF, T, wmma::row_major>;
template <typename T>
using FragBRow = wmma::fragment<wmma::matrix_b, kF, kF, kF, T, wmma::row_major>;
template <typename T>
using FragBCol = wmma::fragment<wmma::matrix_b, kF, kF, kF, T, wmma::col_major>;
using FragC = wmma::fragment<wmma::accumulator, kF, kF, kF, float>;

// Rows [r0, r0 + 64) of one head's q, k, v or dO (src at row 0, row stride ld) into dst [64][LD]
// as they are, zeros past row n; 16-byte copies where `vec`.
template <typename T, int D>
__device__ void load_rows(const T* src, int64_t ld, int64_t r0, int64_t n, T* dst, bool vec) {
  constexpr int LD = ld_tile<D>();
  if (vec) {
    constexpr int per = 16 / sizeof(T), chunks = D / per;
    for (int e = int(threadIdx.x); e < kRows * chunks; e += kThreadsTc) {
      const int r = e / chunks, c = (e % chunks) * per;
      uint4 v = make_uint4(0, 0, 0, 0);
      if (r0 + r < n) v = *reinterpret_cast<const uint4*>(src + (r0 + r) * ld + c);
      *reinterpret_cast<uint4*>(dst + r * LD + c) = v;
    }
    return;
  }
  for (int e = int(threadIdx.x); e < kRows * D; e += kThreadsTc) {
    const int r = e / D, c = e % D;
    dst[r * LD + c] = r0 + r < n ? src[(r0 + r) * ld + c] : from_f<T>(0.f);
  }
}

// out[16 x 64] (f32, row stride kLs) = a[16 x D] @ b^T, b's 64 rows of D (both 16-bit tiles).
template <typename T, int D>
__device__ void product_abt(const T* a, const T* b, float* out) {
  constexpr int LD = ld_tile<D>();
  for (int n = 0; n < kRows / kF; ++n) {
    FragC acc;
    wmma::fill_fragment(acc, 0.f);
    for (int k = 0; k < D / kF; ++k) {
      FragA<T> fa;
      FragBCol<T> fb;
      wmma::load_matrix_sync(fa, a + k * kF, LD);
      wmma::load_matrix_sync(fb, b + n * kF * LD + k * kF, LD);
      wmma::mma_sync(acc, fa, fb, acc);
    }
    wmma::store_matrix_sync(out + n * kF, acc, kLs, wmma::mem_row_major);
  }
}

// acc[d] += p[16 x 64] (16-bit, row stride kLp) @ rows[64 x D] (a 16-bit tile), column block d.
template <typename T, int D>
__device__ void accumulate_pv(const T* p, const T* rows, FragC (&acc)[D / kF]) {
  constexpr int LD = ld_tile<D>();
  for (int k = 0; k < kRows / kF; ++k) {
    FragA<T> fa;
    wmma::load_matrix_sync(fa, p + k * kF, kLp);
    for (int d = 0; d < D / kF; ++d) {
      FragBRow<T> fb;
      wmma::load_matrix_sync(fb, rows + k * kF * LD + d * kF, LD);
      wmma::mma_sync(acc[d], fa, fb, acc[d]);
    }
  }
}

template <int D>
constexpr size_t forward_bytes(size_t elem) {
  return 3 * kRows * ld_tile<D>() * elem + kWarps * kF * (kLs * 4 + kLp * elem + (D + 4) * 4 + 4);
}

// Forward: block (64 queries, head, batch); online softmax per query row over key tiles.
template <typename T, int D>
__global__ void __launch_bounds__(kThreadsTc) forward_tc_kernel(const T* qkv, T* out, float* lse, Geo g, bool vec) {
  extern __shared__ __align__(128) unsigned char smem[];
  constexpr int LD = ld_tile<D>(), LO = D + 4;
  const int64_t ld = g.W, b = blockIdx.z, h = blockIdx.y, i0 = int64_t(blockIdx.x) * kRows;
  if (skipped(g, b)) return;  // the whole block, before any barrier
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) & 31;
  // q, k, v tiles; then per warp: scores [16][kLs] f32, P [16][kLp], output [16][LO] f32, and
  // the rows' rescale factors [16] (every region a multiple of 32 bytes).
  T* q = reinterpret_cast<T*>(smem);
  T* k = q + kRows * LD;
  T* v = k + kRows * LD;
  float* scores = reinterpret_cast<float*>(v + kRows * LD);
  T* probs = reinterpret_cast<T*>(scores + kWarps * kF * kLs);
  float* outs = reinterpret_cast<float*>(probs + kWarps * kF * kLp);
  float* s = scores + warp * kF * kLs;
  T* p = probs + warp * kF * kLp;
  float* o = outs + warp * kF * LO;
  float* corr = outs + kWarps * kF * LO + warp * kF;
  const T* base = qkv + b * g.T * ld;
  const T *kh = base + g.k_col(h / g.G), *vh = base + g.v_col(h / g.G);
  load_rows<T, D>(base + g.q_col(h), ld, i0, g.T, q, vec);
  for (int e = lane; e < kF * LO; e += 32) o[e] = 0.f;
  const int r = lane >> 1, half = lane & 1;  // this lane's row of the warp's 16, and its 32 columns
  const int64_t i = i0 + warp * kF + r;
  float m = -INFINITY, l = 0.f;
  const int64_t last = g.causal ? min(g.T, i0 + kRows) : g.T;  // keys past the block's last query
  for (int64_t j0 = 0; j0 < last; j0 += kRows) {
    __syncthreads();  // the previous tile's readers are done
    load_rows<T, D>(kh, ld, j0, g.T, k, vec);
    load_rows<T, D>(vh, ld, j0, g.T, v, vec);
    __syncthreads();
    if (g.causal && j0 > i0 + warp * kF + kF - 1) continue;  // every key here is after this warp's queries
    product_abt<T, D>(q + warp * kF * LD, k, s);
    __syncwarp();
    float x[32], mb = -INFINITY;
    for (int c = 0; c < 32; ++c) {
      const int64_t j = j0 + half * 32 + c;
      x[c] = visible(g, b, i, j) ? s[r * kLs + half * 32 + c] * g.scale : -INFINITY;
      mb = fmaxf(mb, x[c]);
    }
    mb = fmaxf(mb, __shfl_xor_sync(0xffffffffu, mb, 1));
    const float mn = fmaxf(m, mb);
    const float c_old = mn == -INFINITY ? 1.f : exp_approx(m - mn);  // m == -inf: nothing to rescale
    float sum = 0.f;
    for (int c = 0; c < 32; ++c) {
      const float e = x[c] == -INFINITY ? 0.f : exp_approx(x[c] - mn);
      sum += e;
      p[r * kLp + half * 32 + c] = from_f<T>(e);
    }
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    l = l * c_old + sum;
    m = mn;
    if (half == 0) corr[r] = c_old;
    __syncwarp();
    for (int e = lane; e < kF * D; e += 32) o[(e / D) * LO + e % D] *= corr[e / D];
    __syncwarp();
    FragC acc[D / kF];
    for (int d = 0; d < D / kF; ++d) wmma::load_matrix_sync(acc[d], o + d * kF, LO, wmma::mem_row_major);
    accumulate_pv<T, D>(p, v, acc);
    for (int d = 0; d < D / kF; ++d) wmma::store_matrix_sync(o + d * kF, acc[d], LO, wmma::mem_row_major);
    __syncwarp();
  }
  __syncwarp();
  const float inv = l > 0.f ? 1.f / l : 0.f;  // l == 0: the query sees no key
  if (i < g.T) {
    T* dst = out + (b * g.T + i) * g.C + h * g.D;
    for (int c = half; c < D; c += 2) dst[c] = from_f<T>(o[r * LO + c] * inv);
    if (half == 0) lse[(b * g.H + h) * g.T + i] = l > 0.f ? m + logf(l) : -INFINITY;
  }
}

template <int D>
constexpr size_t backward_bytes(size_t elem) {
  return 4 * kRows * ld_tile<D>() * elem + kWarps * kF * (2 * kLs * 4 + 2 * kLp * elem) + 2 * kRows * 4;
}

// The backward's shared memory: four 16-bit tiles [64][LD] (the block's own two, then the two it
// walks: q, dO, k, v for dQ; k, v, q, dO for dK/dV), then per warp S and dP [16][kLs] f32 each,
// then per warp two 16-bit blocks [16][kLp] (P and dS), then the tile's lse and D [64] each.
template <typename T>
struct Scratch {
  T* tile[4];
  float *s, *dp, *stats;
  T *a, *b;
  __device__ Scratch(unsigned char* smem, int ld, int warp) {
    for (int i = 0; i < 4; ++i) tile[i] = reinterpret_cast<T*>(smem) + i * kRows * ld;
    float* f = reinterpret_cast<float*>(tile[3] + kRows * ld);
    s = f + warp * 2 * kF * kLs;
    dp = s + kF * kLs;
    T* h = reinterpret_cast<T*>(f + kWarps * 2 * kF * kLs);
    a = h + warp * 2 * kF * kLp;
    b = a + kF * kLp;
    stats = reinterpret_cast<float*>(h + kWarps * 2 * kF * kLp);
  }
};

// The lse and D = dO . O of queries [i0, i0 + 64) into stats[0, 64) and stats[64, 128).
__device__ void load_stats(const float* lse, const float* dsum, const Geo& g, int64_t b, int64_t h, int64_t i0,
                           float* stats) {
  for (int e = int(threadIdx.x); e < kRows; e += kThreadsTc) {
    const bool in = i0 + e < g.T;
    stats[e] = in ? lse[(b * g.H + h) * g.T + i0 + e] : -INFINITY;
    stats[kRows + e] = in ? dsum[(b * g.H + h) * g.T + i0 + e] : 0.f;
  }
}

struct Stats {  // a query's lse and D by its index in the block's rows or columns
  const float* l;
  const float* d;
  __device__ float lse(int i) const { return l[i]; }
  __device__ float dsum(int i) const { return d[i]; }
};

// The lane's 32 entries of P and dS for one warp's 16 x 64 block: s holds the scores, dp the
// dO.V products; the rows are queries (dQ) or keys (dK, dV, which take S^T and dP^T).
template <typename T>
__device__ void probabilities(const Geo& g, int64_t b, const float* s, const float* dp, int r, int half, int64_t row0,
                              int64_t col0, bool rows_are_queries, Stats stats, T* p_out, T* ds_out) {
  for (int c = 0; c < 32; ++c) {
    const int col = half * 32 + c;
    const int64_t qi = rows_are_queries ? row0 + r : col0 + col, kj = rows_are_queries ? col0 + col : row0 + r;
    const float l = stats.lse(rows_are_queries ? r : col);
    float pv = 0.f, dsv = 0.f;
    if (qi < g.T && l != -INFINITY && visible(g, b, qi, kj)) {
      pv = exp_approx(s[r * kLs + col] * g.scale - l);
      dsv = pv * (dp[r * kLs + col] - stats.dsum(rows_are_queries ? r : col));
    }
    if (p_out) p_out[r * kLp + col] = from_f<T>(pv);
    ds_out[r * kLp + col] = from_f<T>(dsv);
  }
}

// Writes a warp's 16 rows of D f32 fragments (times `scale`) into dqkv at column `offset`,
// staging through the warp's f32 scratch (16 x kLs floats, D <= kLs).
template <typename T, int D>
__device__ void store_rows(FragC (&acc)[D / kF], float* scratch, float scale, T* dqkv, const Geo& g, int64_t b,
                           int64_t row0, int64_t offset) {
  constexpr int LS = D + 4 > kLs ? D + 4 : kLs;
  static_assert(D + 4 <= 2 * kLs, "the two scratch tiles hold a warp's 16 rows of D floats");
  for (int d = 0; d < D / kF; ++d) wmma::store_matrix_sync(scratch + d * kF, acc[d], LS, wmma::mem_row_major);
  __syncwarp();
  const int lane = int(threadIdx.x) & 31;
  for (int e = lane; e < kF * D; e += 32) {
    const int rr = e / D, c = e % D;
    if (row0 + rr < g.T) dqkv[(b * g.T + row0 + rr) * g.W + offset + c] = from_f<T>(scratch[rr * LS + c] * scale);
  }
  __syncwarp();
}

// dQ: block (64 queries, head, batch) over the key tiles of its kv head it sees; dQ = scale * dS K.
template <typename T, int D>
__global__ void __launch_bounds__(kThreadsTc)
    backward_dq_tc_kernel(const T* qkv, const T* dout, const float* lse, const float* dsum, T* dqkv, Geo g, bool vec) {
  extern __shared__ __align__(128) unsigned char smem[];
  constexpr int LD = ld_tile<D>();
  const int64_t ld = g.W, b = blockIdx.z, h = blockIdx.y, i0 = int64_t(blockIdx.x) * kRows;
  if (skipped(g, b)) return;  // the whole block, before any barrier
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) & 31, r = lane >> 1, half = lane & 1;
  const Scratch<T> sc(smem, LD, warp);
  T *q = sc.tile[0], *dO = sc.tile[1], *k = sc.tile[2], *v = sc.tile[3];
  float *s = sc.s, *dp = sc.dp, *stats = sc.stats;
  T* ds = sc.b;
  const T* base = qkv + b * g.T * ld;
  const T *kh = base + g.k_col(h / g.G), *vh = base + g.v_col(h / g.G);
  load_rows<T, D>(base + g.q_col(h), ld, i0, g.T, q, vec);
  load_rows<T, D>(dout + b * g.T * g.C + h * g.D, g.C, i0, g.T, dO, vec);
  load_stats(lse, dsum, g, b, h, i0, stats);
  FragC acc[D / kF];
  for (int d = 0; d < D / kF; ++d) wmma::fill_fragment(acc[d], 0.f);
  const Stats st{stats + warp * kF, stats + kRows + warp * kF};  // this warp's query rows
  const int64_t row0 = i0 + warp * kF;
  const int64_t last = g.causal ? min(g.T, i0 + kRows) : g.T;
  for (int64_t j0 = 0; j0 < last; j0 += kRows) {
    __syncthreads();
    load_rows<T, D>(kh, ld, j0, g.T, k, vec);
    load_rows<T, D>(vh, ld, j0, g.T, v, vec);
    __syncthreads();
    if (g.causal && j0 > row0 + kF - 1) continue;
    product_abt<T, D>(q + warp * kF * LD, k, s);
    product_abt<T, D>(dO + warp * kF * LD, v, dp);
    __syncwarp();
    probabilities<T>(g, b, s, dp, r, half, row0, j0, true, st, static_cast<T*>(nullptr), ds);
    __syncwarp();
    accumulate_pv<T, D>(ds, k, acc);
  }
  store_rows<T, D>(acc, s, g.scale, dqkv, g, b, row0, g.q_col(h));
}

// dK, dV: block (64 keys, kv head, batch) over its group's query heads in order and, for each,
// every query tile that sees the keys; dV = P^T dO and dK = scale * dS^T Q.
template <typename T, int D>
__global__ void __launch_bounds__(kThreadsTc)
    backward_dkv_tc_kernel(const T* qkv, const T* dout, const float* lse, const float* dsum, T* dqkv, Geo g, bool vec) {
  extern __shared__ __align__(128) unsigned char smem[];
  constexpr int LD = ld_tile<D>();
  const int64_t ld = g.W, b = blockIdx.z, kv = blockIdx.y, j0 = int64_t(blockIdx.x) * kRows;
  if (skipped(g, b)) return;  // the whole block, before any barrier
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) & 31, r = lane >> 1, half = lane & 1;
  const Scratch<T> sc(smem, LD, warp);
  T *k = sc.tile[0], *v = sc.tile[1], *q = sc.tile[2], *dO = sc.tile[3];
  float *s = sc.s, *dp = sc.dp, *stats = sc.stats;
  T *pt = sc.a, *dst = sc.b;
  const T* base = qkv + b * g.T * ld;
  load_rows<T, D>(base + g.k_col(kv), ld, j0, g.T, k, vec);
  load_rows<T, D>(base + g.v_col(kv), ld, j0, g.T, v, vec);
  FragC dk[D / kF], dv[D / kF];
  for (int d = 0; d < D / kF; ++d) wmma::fill_fragment(dk[d], 0.f), wmma::fill_fragment(dv[d], 0.f);
  const Stats st{stats, stats + kRows};  // the tile's query columns
  const int64_t row0 = j0 + warp * kF;  // this warp's first key
  // The group's heads in order, each over its query tiles from the first that sees these keys.
  const int64_t first = g.causal ? j0 : 0, tiles = (g.T - first + kRows - 1) / kRows;
  for (int64_t step = 0; step < g.G * tiles; ++step) {
    const int64_t h = kv * g.G + step / tiles, i0 = first + step % tiles * kRows;
    __syncthreads();
    load_rows<T, D>(base + g.q_col(h), ld, i0, g.T, q, vec);
    load_rows<T, D>(dout + b * g.T * g.C + h * g.D, g.C, i0, g.T, dO, vec);
    load_stats(lse, dsum, g, b, h, i0, stats);
    __syncthreads();
    if (g.causal && i0 + kRows - 1 < row0) continue;  // every query here is before this warp's keys
    product_abt<T, D>(k + warp * kF * LD, q, s);   // S^T: this warp's keys x the tile's queries
    product_abt<T, D>(v + warp * kF * LD, dO, dp);  // dP^T
    __syncwarp();
    probabilities<T>(g, b, s, dp, r, half, row0, i0, false, st, pt, dst);
    __syncwarp();
    accumulate_pv<T, D>(pt, dO, dv);
    accumulate_pv<T, D>(dst, q, dk);
  }
  store_rows<T, D>(dk, s, g.scale, dqkv, g, b, row0, g.k_col(kv));
  store_rows<T, D>(dv, s, 1.f, dqkv, g, b, row0, g.v_col(kv));
}

// Whether q/k/v rows (and dO's) start on 16 bytes: every offset a multiple of 8 elements.
bool vector_rows(const Geo& g, const void* a, const void* b) {
  const auto al = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  return g.W % 8 == 0 && g.C % 8 == 0 && g.D % 8 == 0 && al(a) && (b == nullptr || al(b));
}

template <typename F>
bool with_head_size(int64_t d, F f) {
  switch (d) {
    case 16: return f(std::integral_constant<int, 16>{}), true;
    case 32: return f(std::integral_constant<int, 32>{}), true;
    case 64: return f(std::integral_constant<int, 64>{}), true;
    case 128: return f(std::integral_constant<int, 128>{}), true;
    default: return false;
  }
}

template <typename F>
bool with_16bit(DType dt, F f) {
  if (dt == DType::bf16) return f(__nv_bfloat16{});
  if (dt == DType::f16) return f(__half{});
  return false;
}

}  // namespace

bool forward_tc(const Tensor& qkv, const Geo& g, Tensor& out, Tensor& lse, const Ctx& ctx) {
  const bool vec = vector_rows(g, qkv.raw_data(), nullptr);
  return with_16bit(qkv.dtype(), [&](auto tag) {
    using T = decltype(tag);
    return with_head_size(g.D, [&](auto dc) {
      constexpr int D = decltype(dc)::value;
      const size_t bytes = forward_bytes<D>(sizeof(T));
      allow_shared(forward_tc_kernel<T, D>, bytes, g, ctx);
      const dim3 grid(unsigned((g.T + kRows - 1) / kRows), unsigned(g.H), unsigned(g.B));
      forward_tc_kernel<T, D><<<grid, kThreadsTc, bytes, ctx.stream>>>(ptr<const T>(qkv), ptr<T>(out), ptr<float>(lse),
                                                                      g, vec);
      check_launch("attention");
    });
  });
}

bool backward_tc(const Tensor& dout, const Tensor& qkv, const Tensor& lse, const Tensor& dsum, const Geo& g,
                 Tensor& dqkv, const Ctx& ctx) {
  const bool vec = vector_rows(g, qkv.raw_data(), dout.raw_data());
  return with_16bit(qkv.dtype(), [&](auto tag) {
    using T = decltype(tag);
    return with_head_size(g.D, [&](auto dc) {
      constexpr int D = decltype(dc)::value;
      const size_t bytes = backward_bytes<D>(sizeof(T));
      const dim3 grid(unsigned((g.T + kRows - 1) / kRows), unsigned(g.H), unsigned(g.B));
      const dim3 kv_grid(unsigned((g.T + kRows - 1) / kRows), unsigned(g.K), unsigned(g.B));
      allow_shared(backward_dq_tc_kernel<T, D>, bytes, g, ctx);
      backward_dq_tc_kernel<T, D><<<grid, kThreadsTc, bytes, ctx.stream>>>(
          ptr<const T>(qkv), ptr<const T>(dout), ptr<const float>(lse), ptr<const float>(dsum), ptr<T>(dqkv), g, vec);
      check_launch("attention_backward");
      allow_shared(backward_dkv_tc_kernel<T, D>, bytes, g, ctx);
      backward_dkv_tc_kernel<T, D><<<kv_grid, kThreadsTc, bytes, ctx.stream>>>(
          ptr<const T>(qkv), ptr<const T>(dout), ptr<const float>(lse), ptr<const float>(dsum), ptr<T>(dqkv), g, vec);
      check_launch("attention_backward");
    });
  });
}

}  // namespace zt::ops::cuda::attn
