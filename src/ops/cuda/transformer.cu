// CUDA transformer-layer kernels but attention: embedding (and its dense backward), touched rows,
// layer norm forward/backward and dropout with the CPU's counter-based mask (Note [dropout mask]).
#include <algorithm>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_run_length_encode.cuh>
#include <cub/device/device_scan.cuh>
#include <vector>

#include "common.cuh"

namespace zt::ops::cuda {

namespace {

// ---- embedding ----

// out[i, :] = weight[ids[i], :], values copied exactly; an id out of range (the contract checks
// them) gives a zero row rather than a fault.
template <typename T>
__global__ void embedding_kernel(const T* w, const int32_t* ids, T* o, int64_t n, int64_t v, int64_t c) {
  for (int64_t e = global_index(); e < n * c; e += grid_stride()) {
    const int64_t i = e / c, j = e % c;
    const int32_t id = ids[i];
    o[e] = id >= 0 && id < v ? w[int64_t(id) * c + j] : from_f<T>(0.f);
  }
}

__global__ void iota_kernel(int32_t* p, int64_t n) {
  for (int64_t i = global_index(); i < n; i += grid_stride()) p[i] = int32_t(i);
}

// Note [row gradients] on the GPU: the positions sorted by id (stably: in position order within
// an id) fall into runs, one per touched row; thread (run, column) sums its run's dy in f32 from
// the first position on, the CPU's order, so the gradient is the CPU's bit for bit (no atomics).
template <typename U>
__global__ void embedding_runs_kernel(const U* dy, const int32_t* row_of_run, const int32_t* first, const int32_t* count,
                                      const int32_t* num_runs, const int32_t* position, float* acc, int64_t v,
                                      int64_t c) {
  const int64_t runs = *num_runs;
  for (int64_t e = global_index(); e < runs * c; e += grid_stride()) {
    const int64_t r = e / c, j = e % c;
    const int32_t id = row_of_run[r];
    if (id < 0 || id >= v) continue;  // the contract checks ids; out of range adds nothing
    const int32_t* pos = position + first[r];
    float s = to_f(dy[int64_t(pos[0]) * c + j]);
    for (int32_t k = 1; k < count[r]; ++k) s += to_f(dy[int64_t(pos[k]) * c + j]);
    acc[int64_t(id) * c + j] = s;
  }
}

// ---- layer norm ----

// One block per row: two passes for mean and variance, one for y = (x - mean) * rstd * g + b.
template <typename T>
__global__ void layer_norm_rows(const T* px, const T* pres, const float* g, const float* b, float eps, int64_t c,
                                T* psum, T* py, float* mean, float* rstd) {
  __shared__ float shm[32];
  const int64_t r = blockIdx.x;
  const T* x = norm_input_row(px, pres, psum, r, c);
  T* y = py + r * c;
  float s = 0.f;
  for (int64_t i = threadIdx.x; i < c; i += blockDim.x) s += to_f(x[i]);
  const float m = block_reduce(s, SumOp{}, 0.f, shm) / float(c);
  float q = 0.f;
  for (int64_t i = threadIdx.x; i < c; i += blockDim.x) {
    const float d = to_f(x[i]) - m;
    q += d * d;
  }
  const float rs = 1.f / sqrtf(block_reduce(q, SumOp{}, 0.f, shm) / float(c) + eps);
  for (int64_t i = threadIdx.x; i < c; i += blockDim.x) y[i] = from_f<T>((to_f(x[i]) - m) * rs * g[i] + b[i]);
  if (threadIdx.x == 0) {
    mean[r] = m;
    rstd[r] = rs;
  }
}

// dx = rstd * (wdy - mean(wdy) - xhat * mean(wdy * xhat)), wdy = dy * gamma; one block per row.
template <typename T>
__global__ void layer_norm_dx_rows(const T* pd, const T* px, const float* g, const float* mean, const float* rstd,
                                   int64_t c, bool accumulate, T* pdx) {
  __shared__ float shm[32];
  const int64_t r = blockIdx.x;
  const T* d = pd + r * c;
  const T* x = px + r * c;
  T* o = pdx + r * c;
  const float m = mean[r], s = rstd[r];
  float sa = 0.f, sb = 0.f;
  for (int64_t i = threadIdx.x; i < c; i += blockDim.x) {
    const float w = to_f(d[i]) * g[i];
    sa += w;
    sb += w * ((to_f(x[i]) - m) * s);
  }
  const float ma = block_reduce(sa, SumOp{}, 0.f, shm) / float(c);
  const float mb = block_reduce(sb, SumOp{}, 0.f, shm) / float(c);
  for (int64_t i = threadIdx.x; i < c; i += blockDim.x) {
    const float h = (to_f(x[i]) - m) * s;
    store_dx(o + i, s * (to_f(d[i]) * g[i] - ma - h * mb), accumulate);
  }
}

// Column sums of dy * xhat and dy over the rows of row block blockIdx.y into part[block][2c]
// (dgamma's c, then dbeta's): the first stage of a two-stage, atomic-free reduction.
template <typename T>
__global__ void layer_norm_dgb_part(const T* pd, const T* px, const float* mean, const float* rstd, int64_t rows,
                                    int64_t c, int64_t rows_per, float* part) {
  const int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= c) return;
  const int64_t r0 = int64_t(blockIdx.y) * rows_per, r1 = r0 + rows_per < rows ? r0 + rows_per : rows;
  float dg = 0.f, db = 0.f;
  for (int64_t r = r0; r < r1; ++r) {
    const float d = to_f(pd[r * c + j]);
    dg += d * ((to_f(px[r * c + j]) - mean[r]) * rstd[r]);
    db += d;
  }
  float* p = part + int64_t(blockIdx.y) * 2 * c;
  p[j] = dg;
  p[c + j] = db;
}

// Second stage: the row blocks' partials summed in block order, rounded once.
template <typename T>
__global__ void layer_norm_dgb_total(const float* part, int64_t nb, int64_t c, T* dgamma, T* dbeta) {
  for (int64_t j = global_index(); j < 2 * c; j += grid_stride()) {
    float s = 0.f;
    for (int64_t b = 0; b < nb; ++b) s += part[b * 2 * c + j];
    if (j < c)
      dgamma[j] = from_f<T>(s);
    else
      dbeta[j - c] = from_f<T>(s);
  }
}

// ---- dropout (Note [dropout mask], CPU dropout.cpp) ----

constexpr uint64_t kGolden = 0x9e3779b97f4a7c15ull;

__host__ __device__ __forceinline__ uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// One thread per pair: the hash of pair j gives element 2j its low 32 bits, 2j+1 its high ones.
template <typename T>
__global__ void dropout_kernel(const T* x, T* o, int64_t n, uint64_t key, uint64_t thr, float scale) {
  const int64_t pairs = (n + 1) / 2;
  for (int64_t j = global_index(); j < pairs; j += grid_stride()) {
    const uint64_t h = mix64((uint64_t(j) * kGolden) ^ key);
    const int64_t i = 2 * j;
    o[i] = from_f<T>(to_f(x[i]) * ((h & 0xffffffffull) >= thr ? scale : 0.f));
    if (i + 1 < n) o[i + 1] = from_f<T>(to_f(x[i + 1]) * ((h >> 32) >= thr ? scale : 0.f));
  }
}

}  // namespace

void embedding(const Tensor& weight, const Tensor& ids, Tensor& out) {
  Ctx ctx(weight);
  const int64_t n = ids.numel(), v = weight.size(0), c = weight.size(1);
  dispatch_float(weight.dtype(), "embedding", [&](auto tag) {
    using T = typename decltype(tag)::type;
    embedding_kernel<T><<<blocks_for(n * c), kThreads, 0, ctx.stream>>>(ptr<const T>(weight), ptr<const int32_t>(ids),
                                                                         ptr<T>(out), n, v, c);
  });
  check_launch("embedding");
}

void embedding_backward(const Tensor& dy, const Tensor& ids, Tensor& out) {
  Ctx ctx(dy);
  const int64_t n = ids.numel(), v = out.size(0), c = out.size(1);
  // f32 sums go straight into an f32 out, else into a workspace cast once at the end (freed
  // after enqueueing: the stream orders any reuse of this memory after these kernels).
  Tensor acc = out.dtype() == DType::f32 ? out : workspace({v, c}, DType::f32, out.device());
  ZT_CUDA_CHECK(cudaMemsetAsync(acc.raw_data(), 0, acc.nbytes(), ctx.stream));
  if (n * c > 0) {
    ZT_CHECK(n < (int64_t(1) << 31), "[embedding_backward] ", n, " ids on cuda: at most 2^31 - 1");
    const int items = int(n);
    // Sorted ids, positions and their sorted order, each run's id, count and first index, the
    // run count; then cub's scratch (its size asked of each algorithm).
    Tensor idx = workspace({6 * n + 1}, DType::i32, out.device());
    int32_t* keys = ptr<int32_t>(idx);
    int32_t *pos = keys + n, *sorted = pos + n, *row = sorted + n, *count = row + n, *first = count + n;
    int32_t* runs = first + n;
    const int32_t* pid = ptr<const int32_t>(ids);
    size_t sort_bytes = 0, rle_bytes = 0, scan_bytes = 0;
    ZT_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, sort_bytes, pid, keys, pos, sorted, items, 0, 32, ctx.stream));
    ZT_CUDA_CHECK(cub::DeviceRunLengthEncode::Encode(nullptr, rle_bytes, keys, row, count, runs, items, ctx.stream));
    ZT_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(nullptr, scan_bytes, count, first, items, ctx.stream));
    size_t bytes = std::max({sort_bytes, rle_bytes, scan_bytes, size_t(8)});
    Tensor scratch = workspace({int64_t((bytes + 7) / 8)}, DType::i64, out.device());
    ZT_CUDA_CHECK(cudaMemsetAsync(count, 0, size_t(n) * sizeof(int32_t), ctx.stream));  // past the runs: summed as 0
    iota_kernel<<<blocks_for(n), kThreads, 0, ctx.stream>>>(pos, n);
    check_launch("embedding_backward");
    ZT_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(scratch.raw_data(), bytes = sort_bytes, pid, keys, pos, sorted, items,
                                                  0, 32, ctx.stream));
    ZT_CUDA_CHECK(
        cub::DeviceRunLengthEncode::Encode(scratch.raw_data(), bytes = rle_bytes, keys, row, count, runs, items, ctx.stream));
    ZT_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(scratch.raw_data(), bytes = scan_bytes, count, first, items, ctx.stream));
    dispatch_float(dy.dtype(), "embedding_backward", [&](auto tag) {
      using U = typename decltype(tag)::type;
      embedding_runs_kernel<U><<<blocks_for(n * c), kThreads, 0, ctx.stream>>>(ptr<const U>(dy), row, first, count,
                                                                             runs, sorted, ptr<float>(acc), v, c);
    });
    check_launch("embedding_backward");
  }
  if (!acc.same(out)) cast(acc, out);
}

// The dense composition (a GPU's bandwidth makes [V, C] cheap): the gradient in `grad`, added.
void embedding_backward_add(const Tensor& dy, const Tensor& ids, DType grad, Tensor& out) {
  Tensor dense = workspace(out.shape(), grad, out.device());
  embedding_backward(dy, ids, dense);
  axpy_(out, 1.f, dense);
}

// The ids are copied to the host and deduplicated there (a bitmap when dense, else a sort), as
// the CPU does: the result is a host vector anyway, and ids are small beside activations.
std::vector<int32_t> touched_rows(const Tensor& ids, int64_t num_rows) {
  const int64_t n = ids.numel();
  std::vector<int32_t> host(static_cast<size_t>(n));
  if (n > 0) {
    Ctx ctx(ids);
    ZT_CUDA_CHECK(cudaMemcpyAsync(host.data(), ids.raw_data(), size_t(n) * sizeof(int32_t), cudaMemcpyDeviceToHost,
                                  ctx.stream));
    sync(ctx.stream);
  }
  for (int64_t i = 0; i < n; ++i)
    ZT_CHECK(host[size_t(i)] >= 0 && host[size_t(i)] < num_rows, "[touched_rows] id ", host[size_t(i)],
             " at position ", i, " is outside [0, ", num_rows, ")");
  std::vector<int32_t> rows;
  if (n >= num_rows / 8) {
    std::vector<uint8_t> seen(size_t(num_rows), 0);
    for (int32_t id : host) seen[size_t(id)] = 1;
    for (int64_t r = 0; r < num_rows; ++r)
      if (seen[size_t(r)]) rows.push_back(int32_t(r));
    return rows;
  }
  rows = std::move(host);
  std::sort(rows.begin(), rows.end());
  rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
  return rows;
}

void layer_norm(const Tensor& x, const Tensor* residual, const Tensor& gamma, const Tensor& beta, float eps, Tensor* sum,
                Tensor& y, Tensor& mean, Tensor& rstd) {
  Ctx ctx(x);
  const int64_t c = x.size(-1), rows = x.numel() / c;
  const Tensor g = f32_copy(gamma), b = f32_copy(beta);  // kept alive until the launch is enqueued
  dispatch_float(x.dtype(), "layer_norm", [&](auto tag) {
    using T = typename decltype(tag)::type;
    layer_norm_rows<T><<<unsigned(rows), row_threads(c), 0, ctx.stream>>>(
        ptr<const T>(x), residual ? ptr<const T>(*residual) : nullptr, ptr<const float>(g), ptr<const float>(b), eps, c,
        sum ? ptr<T>(*sum) : nullptr, ptr<T>(y), ptr<float>(mean), ptr<float>(rstd));
  });
  check_launch("layer_norm");
}

void layer_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& gamma, const Tensor& mean, const Tensor& rstd,
                         bool accumulate, Tensor& dx, Tensor& dgamma, Tensor& dbeta) {
  Ctx ctx(x);
  const int64_t c = x.size(-1), rows = x.numel() / c;
  const Tensor g = f32_copy(gamma);
  const int64_t nb = std::clamp<int64_t>((rows + 31) / 32, 1, 1024), rows_per = (rows + nb - 1) / nb;
  // Freed after enqueueing: the stream orders any reuse of this memory after these kernels.
  Tensor part = workspace({nb, 2 * c}, DType::f32, x.device());
  dispatch_float(x.dtype(), "layer_norm_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    layer_norm_dx_rows<T><<<unsigned(rows), row_threads(c), 0, ctx.stream>>>(
        ptr<const T>(dy), ptr<const T>(x), ptr<const float>(g), ptr<const float>(mean), ptr<const float>(rstd), c,
        accumulate, ptr<T>(dx));
    check_launch("layer_norm_backward");
    const dim3 grid(unsigned((c + kThreads - 1) / kThreads), unsigned(nb));
    layer_norm_dgb_part<T><<<grid, kThreads, 0, ctx.stream>>>(ptr<const T>(dy), ptr<const T>(x),
                                                               ptr<const float>(mean), ptr<const float>(rstd), rows, c,
                                                               rows_per, ptr<float>(part));
  });
  check_launch("layer_norm_backward");
  dispatch_float(gamma.dtype(), "layer_norm_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    layer_norm_dgb_total<T><<<blocks_for(2 * c), kThreads, 0, ctx.stream>>>(ptr<const float>(part), nb, c,
                                                                             ptr<T>(dgamma), ptr<T>(dbeta));
  });
  check_launch("layer_norm_backward");
}

void dropout(const Tensor& x, float p, uint64_t seed, Tensor& out) {
  Ctx ctx(x);
  const int64_t n = x.numel();
  const uint64_t key = mix64(seed + kGolden);
  const uint64_t thr = uint64_t(double(p) * 4294967296.0);  // p < 1: below 2^32
  const float scale = 1.f / (1.f - p);
  dispatch_float(x.dtype(), "dropout", [&](auto tag) {
    using T = typename decltype(tag)::type;
    dropout_kernel<T><<<blocks_for((n + 1) / 2), kThreads, 0, ctx.stream>>>(ptr<const T>(x), ptr<T>(out), n, key, thr,
                                                                              scale);
  });
  check_launch("dropout");
}

}  // namespace zt::ops::cuda
