// CUDA scaled dot-product attention, flash style: tiles of 32 queries x 32 keys through shared
// memory with an online softmax (f32), no T x T scores; backward recomputes P from lse. 16-bit
// tensors go to cuDNN's fused flash attention where it takes them (attention_cudnn.cpp, Note
// [cudnn attention]), else, with common head sizes, to the tensor-core tiles of attention_tc.cu.
// Grouped-query attention reads each query head's kv head in place; a kv head's dK and dV sum over
// its group's query heads in head order within one block (no atomics).
#include "attention_common.cuh"

namespace zt::ops::cuda {

namespace {

using attn::allow_shared;
using attn::geometry;
using attn::Geo;
using attn::skipped;
using attn::visible;

// Note [cuda attention tiles]: a block of 8 warps owns 32 rows (queries, or keys in dK/dV), 4 per
// warp; each lane takes one row of the other side's 32-row tile for dot products (those tiles
// are padded to D+1 floats per row, so lanes hit distinct banks), then walks feature columns
// c = lane, lane+32, ... for the rank-32 updates, reading the warp's 32 weights from shared.
constexpr int kTile = 32, kWarps = 8, kRowsPerWarp = kTile / kWarps, kAttnThreads = kWarps * 32;

__device__ __forceinline__ float dot(const float* a, const float* b, int64_t d) {
  float s = 0.f;
  for (int64_t c = 0; c < d; ++c) s += a[c] * b[c];
  return s;
}

// A backward block's first four shared tiles: its own rows' two [kTile][D], then the two it walks
// [kTile][D + 1] (Note [cuda attention tiles]); its other buffers start at `rest`.
struct PairTiles {
  float *own[2], *other[2], *rest;
  __device__ PairTiles(float* smem, int64_t D) {
    own[0] = smem;
    own[1] = own[0] + kTile * D;
    other[0] = own[1] + kTile * D;
    other[1] = other[0] + kTile * (D + 1);
    rest = other[1] + kTile * (D + 1);
  }
};

// Rows [r0, r0 + kTile) of one head's q, k or v (src points at row 0, row stride ld) into dst
// [kTile][stride] as f32 times s, zero past row n.
template <typename T>
__device__ void load_tile(const T* src, int64_t ld, int64_t r0, int64_t n, int64_t d, float s, float* dst,
                          int64_t stride) {
  for (int64_t e = threadIdx.x; e < kTile * d; e += blockDim.x) {
    const int64_t r = e / d, c = e % d;
    dst[r * stride + c] = r0 + r < n ? to_f(src[(r0 + r) * ld + c]) * s : 0.f;
  }
}

// Forward: block (query tile, head, batch). Online softmax per query over key tiles: running
// max m and sum l in registers, the unnormalised output in shared acc.
template <typename T>
__global__ void attention_forward(const T* qkv, T* out, float* lse, Geo g) {
  extern __shared__ float smem[];
  const int64_t D = g.D, ld = g.W, b = blockIdx.z, h = blockIdx.y, i0 = int64_t(blockIdx.x) * kTile;
  if (skipped(g, b)) return;  // the whole block, before any barrier
  const int64_t ni = min(int64_t(kTile), g.T - i0);
  float* q = smem;                // [kTile][D], scaled
  float* k = q + kTile * D;       // [kTile][D + 1]
  float* v = k + kTile * (D + 1);  // [kTile][D]
  float* acc = v + kTile * D;     // [kTile][D]
  float* pw = acc + kTile * D;    // [kWarps][32]: each warp's probabilities
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) & 31;
  pw += warp * 32;
  const T* base = qkv + b * g.T * ld;
  const T *kh = base + g.k_col(h / g.G), *vh = base + g.v_col(h / g.G);
  load_tile(base + g.q_col(h), ld, i0, g.T, D, g.scale, q, D);
  for (int64_t e = threadIdx.x; e < kTile * D; e += blockDim.x) acc[e] = 0.f;
  float m[kRowsPerWarp], l[kRowsPerWarp];
  for (int r = 0; r < kRowsPerWarp; ++r) m[r] = -INFINITY, l[r] = 0.f;
  const int64_t end = g.causal ? i0 + ni : g.T;
  for (int64_t j0 = 0; j0 < end; j0 += kTile) {
    __syncthreads();  // the previous tile's readers are done
    load_tile(kh, ld, j0, g.T, D, 1.f, k, D + 1);
    load_tile(vh, ld, j0, g.T, D, 1.f, v, D);
    __syncthreads();
    for (int r = 0; r < kRowsPerWarp; ++r) {
      const int64_t il = warp * kRowsPerWarp + r, i = i0 + il;
      if (il >= ni) continue;
      const float s = visible(g, b, i, j0 + lane) ? dot(q + il * D, k + lane * (D + 1), D) : -INFINITY;
      const float mb = warp_reduce(s, MaxOp{});
      if (mb == -INFINITY) continue;  // no key of this tile visible to query i
      const float mn = fmaxf(m[r], mb), corr = exp_approx(m[r] - mn);
      const float p = exp_approx(s - mn);
      m[r] = mn;
      l[r] = l[r] * corr + warp_reduce(p, SumOp{});
      pw[lane] = p;
      __syncwarp();
      for (int64_t c = lane; c < D; c += 32) {
        float a = acc[il * D + c] * corr;
        for (int jj = 0; jj < kTile; ++jj) a += pw[jj] * v[jj * D + c];
        acc[il * D + c] = a;
      }
      __syncwarp();
    }
  }
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const int64_t il = warp * kRowsPerWarp + r, i = i0 + il;
    if (il >= ni) continue;
    const float inv = l[r] > 0.f ? 1.f / l[r] : 0.f;  // l == 0: the query sees no key
    T* o = out + (b * g.T + i) * g.C + h * D;
    for (int64_t c = lane; c < D; c += 32) o[c] = from_f<T>(acc[il * D + c] * inv);
    if (lane == 0) lse[(b * g.H + h) * g.T + i] = l[r] > 0.f ? m[r] + logf(l[r]) : -INFINITY;
  }
}

// D_i = dO_i . O_i per (b, t, h), one warp each, into dsum [B, H, T].
template <typename T>
__global__ void attention_rowsums(const T* dout, const T* out, float* dsum, Geo g) {
  const int64_t w = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  if (w >= g.B * g.T * g.H) return;
  const int lane = int(threadIdx.x) & 31;
  const int64_t bt = w / g.H, h = w % g.H;
  if (skipped(g, bt / g.T)) return;
  const T* o = out + bt * g.C + h * g.D;
  const T* d = dout + bt * g.C + h * g.D;
  float s = 0.f;
  for (int64_t c = lane; c < g.D; c += 32) s += to_f(o[c]) * to_f(d[c]);
  s = warp_reduce(s, SumOp{});
  if (lane == 0) dsum[((bt / g.T) * g.H + h) * g.T + bt % g.T] = s;
}

// dQ: block (query tile, head, batch); dS = P * (dP - D_i), P = exp(S - lse); dQ = scale * dS K
// (K and V of the head's kv head).
template <typename T>
__global__ void attention_backward_dq(const T* qkv, const T* dout, const float* lse, const float* dsum, T* dqkv,
                                      Geo g) {
  extern __shared__ float smem[];
  const int64_t D = g.D, ld = g.W, b = blockIdx.z, h = blockIdx.y, i0 = int64_t(blockIdx.x) * kTile;
  if (skipped(g, b)) return;  // the whole block, before any barrier
  const int64_t ni = min(int64_t(kTile), g.T - i0);
  const PairTiles t(smem, D);
  float *q = t.own[0], *dO = t.own[1], *k = t.other[0], *v = t.other[1];  // q scaled
  float* dq = t.rest;                                                     // [kTile][D]
  float* pw = dq + kTile * D;                                             // [kWarps][32]: each warp's dS row
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) & 31;
  pw += warp * 32;
  const T* base = qkv + b * g.T * ld;
  const T *kh = base + g.k_col(h / g.G), *vh = base + g.v_col(h / g.G);
  load_tile(base + g.q_col(h), ld, i0, g.T, D, g.scale, q, D);
  load_tile(dout + b * g.T * g.C + h * D, g.C, i0, g.T, D, 1.f, dO, D);
  for (int64_t e = threadIdx.x; e < kTile * D; e += blockDim.x) dq[e] = 0.f;
  float lse_r[kRowsPerWarp], d_r[kRowsPerWarp];
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const int64_t il = warp * kRowsPerWarp + r, at = (b * g.H + h) * g.T + i0 + il;
    lse_r[r] = il < ni ? lse[at] : -INFINITY;
    d_r[r] = il < ni ? dsum[at] : 0.f;
  }
  const int64_t end = g.causal ? i0 + ni : g.T;
  for (int64_t j0 = 0; j0 < end; j0 += kTile) {
    __syncthreads();
    load_tile(kh, ld, j0, g.T, D, 1.f, k, D + 1);
    load_tile(vh, ld, j0, g.T, D, 1.f, v, D + 1);
    __syncthreads();
    for (int r = 0; r < kRowsPerWarp; ++r) {
      const int64_t il = warp * kRowsPerWarp + r, i = i0 + il;
      if (il >= ni || lse_r[r] == -INFINITY) continue;  // padding, or a query that sees no key
      float ds = 0.f;
      if (visible(g, b, i, j0 + lane)) {
        const float p = exp_approx(dot(q + il * D, k + lane * (D + 1), D) - lse_r[r]);
        ds = p * (dot(dO + il * D, v + lane * (D + 1), D) - d_r[r]);
      }
      pw[lane] = ds;
      __syncwarp();
      for (int64_t c = lane; c < D; c += 32) {
        float a = dq[il * D + c];
        for (int jj = 0; jj < kTile; ++jj) a += pw[jj] * k[jj * (D + 1) + c];
        dq[il * D + c] = a;
      }
      __syncwarp();
    }
  }
  __syncthreads();
  for (int64_t e = threadIdx.x; e < ni * D; e += blockDim.x) {
    const int64_t il = e / D, c = e % D;
    dqkv[(b * g.T + i0 + il) * ld + g.q_col(h) + c] = from_f<T>(dq[e] * g.scale);
  }
}

// dK, dV: block (key tile, kv head, batch) over the group's query heads in order and, for each,
// every query tile that sees the keys; dV = P^T dO and dK = dS^T Q (q scaled, so this is
// scale * dS^T Q). With one head per group the sums are multi-head attention's, in its order.
template <typename T>
__global__ void attention_backward_dkv(const T* qkv, const T* dout, const float* lse, const float* dsum, T* dqkv,
                                       Geo g) {
  extern __shared__ float smem[];
  const int64_t D = g.D, ld = g.W, b = blockIdx.z, kv = blockIdx.y, j0 = int64_t(blockIdx.x) * kTile;
  if (skipped(g, b)) return;  // the whole block, before any barrier
  const int64_t nj = min(int64_t(kTile), g.T - j0);
  const PairTiles t(smem, D);
  float *k = t.own[0], *v = t.own[1], *q = t.other[0], *dO = t.other[1];  // q scaled
  float* dk = t.rest;                                                     // [kTile][D]
  float* dv = dk + kTile * D;                                             // [kTile][D]
  float* lse_t = dv + kTile * D;                                          // [kTile]
  float* d_t = lse_t + kTile;                                             // [kTile]
  float* pw = d_t + kTile;  // [kWarps][2][32]: each warp's P and dS columns
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) & 31;
  pw += warp * 64;
  float* dsw = pw + 32;
  const T* base = qkv + b * g.T * ld;
  load_tile(base + g.k_col(kv), ld, j0, g.T, D, 1.f, k, D);
  load_tile(base + g.v_col(kv), ld, j0, g.T, D, 1.f, v, D);
  for (int64_t e = threadIdx.x; e < kTile * D; e += blockDim.x) dk[e] = dv[e] = 0.f;
  // The group's heads in order, each over its query tiles from the first that sees these keys.
  const int64_t first = g.causal ? j0 : 0, tiles = (g.T - first + kTile - 1) / kTile;
  for (int64_t step = 0; step < g.G * tiles; ++step) {
    const int64_t h = kv * g.G + step / tiles, i0 = first + step % tiles * kTile;
    __syncthreads();
    load_tile(base + g.q_col(h), ld, i0, g.T, D, g.scale, q, D + 1);
    load_tile(dout + b * g.T * g.C + h * D, g.C, i0, g.T, D, 1.f, dO, D + 1);
    for (int64_t e = threadIdx.x; e < kTile; e += blockDim.x) {
      const bool in = i0 + e < g.T;
      lse_t[e] = in ? lse[(b * g.H + h) * g.T + i0 + e] : -INFINITY;
      d_t[e] = in ? dsum[(b * g.H + h) * g.T + i0 + e] : 0.f;
    }
    __syncthreads();
    for (int r = 0; r < kRowsPerWarp; ++r) {
      const int64_t jl = warp * kRowsPerWarp + r, j = j0 + jl, i = i0 + lane;
      if (jl >= nj) continue;
      float p = 0.f, ds = 0.f;
      if (i < g.T && lse_t[lane] != -INFINITY && visible(g, b, i, j)) {
        p = exp_approx(dot(q + lane * (D + 1), k + jl * D, D) - lse_t[lane]);
        ds = p * (dot(dO + lane * (D + 1), v + jl * D, D) - d_t[lane]);
      }
      pw[lane] = p;
      dsw[lane] = ds;
      __syncwarp();
      for (int64_t c = lane; c < D; c += 32) {
        float a = dv[jl * D + c], e = dk[jl * D + c];
        for (int ii = 0; ii < kTile; ++ii) {
          a += pw[ii] * dO[ii * (D + 1) + c];
          e += dsw[ii] * q[ii * (D + 1) + c];
        }
        dv[jl * D + c] = a;
        dk[jl * D + c] = e;
      }
      __syncwarp();
    }
  }
  __syncthreads();
  for (int64_t e = threadIdx.x; e < nj * D; e += blockDim.x) {
    const int64_t jl = e / D, c = e % D;
    T* row = dqkv + (b * g.T + j0 + jl) * ld + c;
    row[g.k_col(kv)] = from_f<T>(dk[e]);
    row[g.v_col(kv)] = from_f<T>(dv[e]);
  }
}

// Note [cudnn padding mask]: per sequence (one thread each), its query length T, its key length
// (the mask's leading ones where the rest are zeros and there is at least one, else T) and
// whether the own kernels must redo it (its mask is not right padding).
__global__ void padding_lengths(const int32_t* mask, int64_t B, int64_t T, int32_t* seq_q, int32_t* seq_kv,
                                int32_t* own) {
  const int64_t b = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (b >= B) return;
  const int32_t* m = mask + b * T;
  int64_t ones = 0;
  while (ones < T && m[ones] != 0) ++ones;
  bool padding = ones > 0;
  for (int64_t j = ones; j < T && padding; ++j) padding = m[j] == 0;
  seq_q[b] = int32_t(T);
  seq_kv[b] = int32_t(padding ? ones : T);
  own[b] = padding ? 0 : 1;
}

// A key-masked call's lengths for cuDNN and the sequences the own kernels redo (Note [cudnn
// padding mask]): three i32 [B] rows 16-byte aligned in one stream-ordered workspace.
struct Padding {
  Tensor buf;
  attn::SeqLengths len;
  const int32_t* own = nullptr;
};

// A key-masked call cuDNN may take gets its lengths; any other call none (nothing launched).
Padding padding(const Geo& g, DType dt, const Ctx& ctx) {
  Padding p;
  if (!g.mask || attn::cudnn_refusal(g, dt)) return p;
  const int64_t row = (g.B + 3) / 4 * 4;
  p.buf = workspace({3 * row}, DType::i32, ctx.device());
  int32_t* base = ptr<int32_t>(p.buf);
  p.len = {base, base + row};
  p.own = base + 2 * row;
  padding_lengths<<<unsigned((g.B + 127) / 128), 128, 0, ctx.stream>>>(g.mask, g.B, g.T, base, base + row,
                                                                    base + 2 * row);
  check_launch("attention");
  return p;
}

}  // namespace

// The start line's words: cuDNN's where cudnn_refusal takes heads of this size and dtype (a
// sequence of 1024; what depends on the length, the device or the plan is said at run time), else
// the own kernels, tensor-core for 16-bit heads of 16-128 (attention_tc.cu), and cuDNN's reason.
std::string attention_path(DType dt, int64_t n_head, int64_t n_kv_head, int64_t head_size, bool key_mask) {
  static const int32_t masked = 1;
  Geo g{};
  g.B = 1, g.T = 1024, g.H = n_head, g.K = n_kv_head, g.G = n_head / n_kv_head, g.D = head_size;
  g.C = n_head * head_size, g.W = (n_head + 2 * n_kv_head) * head_size, g.causal = !key_mask;
  g.mask = key_mask ? &masked : nullptr;
  const char* why = attn::cudnn_refusal(g, dt);
  if (!why && key_mask)
    return "cuDNN fused flash attention (cuda; a sequence whose key mask is not right padding: the own kernels)";
  if (!why) return "cuDNN fused flash attention (cuda)";
  const bool tc = dt != DType::f32 && (head_size == 16 || head_size == 32 || head_size == 64 || head_size == 128);
  return std::string(tc ? "own tensor-core kernels" : "own kernels") + " (cuda; cuDNN's refuses " + why + ")";
}

void attention(const Tensor& qkv, int64_t n_head, int64_t n_kv_head, bool causal, const Tensor* key_mask, Tensor& out,
               Tensor& lse) {
  Ctx ctx(qkv);
  Geo g = geometry(qkv, n_head, n_kv_head, causal, key_mask);
  const Padding pad = padding(g, qkv.dtype(), ctx);
  if (attn::forward_cudnn(qkv, g, pad.len, out, lse, ctx)) {  // Note [cudnn attention]
    if (!g.mask) return;
    g.only = pad.own;  // the own kernels redo the sequences whose mask is not right padding
  }
  if (attn::forward_tc(qkv, g, out, lse, ctx)) return;
  const dim3 grid(unsigned((g.T + kTile - 1) / kTile), unsigned(g.H), unsigned(g.B));
  const size_t bytes = size_t(kTile * (4 * g.D + 1) + kWarps * 32) * sizeof(float);
  dispatch_float(qkv.dtype(), "attention", [&](auto tag) {
    using T = typename decltype(tag)::type;
    allow_shared(attention_forward<T>, bytes, g, ctx);
    attention_forward<T><<<grid, kAttnThreads, bytes, ctx.stream>>>(ptr<const T>(qkv), ptr<T>(out), ptr<float>(lse),
                                                                     g);
  });
  check_launch("attention");
}

// Two kernels with no atomics: dQ per query tile and dK/dV per key tile of a kv head (over its
// group's query heads in order), each recomputing S and dP (as the CPU's schedule for few heads),
// so results do not depend on timing.
void attention_backward(const Tensor& dout, const Tensor& qkv, const Tensor& out, const Tensor& lse, int64_t n_head,
                        int64_t n_kv_head, bool causal, const Tensor* key_mask, Tensor& dqkv) {
  Ctx ctx(qkv);
  Geo g = geometry(qkv, n_head, n_kv_head, causal, key_mask);
  // cuDNN's backward only where its forward ran (it reads cuDNN's Stats as lse).
  const Padding pad = padding(g, qkv.dtype(), ctx);
  if (attn::backward_cudnn(dout, qkv, out, lse, g, pad.len, dqkv, ctx)) {
    if (!g.mask) return;
    g.only = pad.own;  // as the forward: these sequences' lse is the own kernels'
  }
  // Freed after enqueueing: the stream orders any reuse of this memory after these kernels.
  Tensor dsum = workspace({g.B, g.H, g.T}, DType::f32, qkv.device());
  const dim3 grid(unsigned((g.T + kTile - 1) / kTile), unsigned(g.H), unsigned(g.B));
  const dim3 kv_grid(unsigned((g.T + kTile - 1) / kTile), unsigned(g.K), unsigned(g.B));
  const size_t dq_bytes = size_t(kTile * (5 * g.D + 2) + kWarps * 32) * sizeof(float);
  const size_t dkv_bytes = size_t(kTile * (6 * g.D + 4) + kWarps * 64) * sizeof(float);
  dispatch_float(qkv.dtype(), "attention_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const int64_t warps = g.B * g.T * g.H;
    attention_rowsums<T><<<unsigned((warps * 32 + kThreads - 1) / kThreads), kThreads, 0, ctx.stream>>>(
        ptr<const T>(dout), ptr<const T>(out), ptr<float>(dsum), g);
  });
  check_launch("attention_backward");
  if (attn::backward_tc(dout, qkv, lse, dsum, g, dqkv, ctx)) return;
  dispatch_float(qkv.dtype(), "attention_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    allow_shared(attention_backward_dq<T>, dq_bytes, g, ctx);
    attention_backward_dq<T><<<grid, kAttnThreads, dq_bytes, ctx.stream>>>(
        ptr<const T>(qkv), ptr<const T>(dout), ptr<const float>(lse), ptr<const float>(dsum), ptr<T>(dqkv), g);
    check_launch("attention_backward");
    allow_shared(attention_backward_dkv<T>, dkv_bytes, g, ctx);
    attention_backward_dkv<T><<<kv_grid, kAttnThreads, dkv_bytes, ctx.stream>>>(
        ptr<const T>(qkv), ptr<const T>(dout), ptr<const float>(lse), ptr<const float>(dsum), ptr<T>(dqkv), g);
  });
  check_launch("attention_backward");
}

}  // namespace zt::ops::cuda
