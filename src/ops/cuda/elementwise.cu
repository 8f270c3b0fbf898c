// CUDA elementwise kernels: numpy-broadcasting binary ops, scalar ops and activations (the CPU's
// formulas, approx.h), sum_to, and the fused gelu + bias backward. f32 math, one rounding.
#include <vector>

#include "common.cuh"

namespace zt::ops::cuda {

namespace {

constexpr int kMaxDims = 8;

// A shape with one or two operands' strides (elements, 0 on broadcast dimensions).
struct Dims {
  int n = 0;
  int64_t size[kMaxDims];
  int64_t sa[kMaxDims];
  int64_t sb[kMaxDims];
};

// Strides of contiguous `s` seen through `out` (right-aligned), 0 on broadcast dims.
Shape broadcast_strides(const Shape& s, const Shape& out) {
  Shape st(out.size(), 0);
  const Shape cs = contiguous_strides(s);
  const size_t lead = out.size() - s.size();
  for (size_t i = 0; i < s.size(); ++i) st[lead + i] = s[i] == 1 ? 0 : cs[i];
  return st;
}

// Drops size-1 dims and merges neighbours both operands step through alike, so deep shapes fit
// kMaxDims; throws when they still do not.
Dims coalesce(const Shape& shape, const Shape& sa, const Shape& sb, const char* op) {
  std::vector<int64_t> sz, a, b;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    if (!sz.empty() && a.back() == sa[d] * shape[d] && b.back() == sb[d] * shape[d]) {
      sz.back() *= shape[d];
      a.back() = sa[d];
      b.back() = sb[d];
      continue;
    }
    sz.push_back(shape[d]);
    a.push_back(sa[d]);
    b.push_back(sb[d]);
  }
  ZT_CHECK(sz.size() <= size_t(kMaxDims), "[", op, "] broadcasting over more than ", kMaxDims,
           " distinct dimensions is not supported on cuda");
  Dims r;
  r.n = int(sz.size());
  for (int i = 0; i < r.n; ++i) {
    r.size[i] = sz[size_t(i)];
    r.sa[i] = a[size_t(i)];
    r.sb[i] = b[size_t(i)];
  }
  return r;
}

template <Binary op>
__device__ __forceinline__ float apply(float x, float y) {
  if constexpr (op == Binary::add) return x + y;
  if constexpr (op == Binary::sub) return x - y;
  return x * y;
}

template <Binary op, typename T>
__global__ void binary_same(const T* a, const T* b, T* o, int64_t n) {
  for (int64_t i = global_index(); i < n; i += grid_stride()) o[i] = from_f<T>(apply<op>(to_f(a[i]), to_f(b[i])));
}

template <Binary op, typename T>
__global__ void binary_bcast(const T* a, const T* b, T* o, int64_t n, Dims d) {
  for (int64_t i = global_index(); i < n; i += grid_stride()) {
    int64_t rem = i, oa = 0, ob = 0;
    for (int k = d.n - 1; k >= 0; --k) {
      const int64_t idx = rem % d.size[k];
      rem /= d.size[k];
      oa += idx * d.sa[k];
      ob += idx * d.sb[k];
    }
    o[i] = from_f<T>(apply<op>(to_f(a[oa]), to_f(b[ob])));
  }
}

template <Binary op>
void binary_impl(const Tensor& a, const Tensor& b, Tensor& out) {
  Ctx ctx(out);
  const int64_t n = out.numel();
  dispatch_float(a.dtype(), "binary", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (a.shape() == b.shape()) {
      binary_same<op, T><<<blocks_for(n), kThreads, 0, ctx.stream>>>(ptr<const T>(a), ptr<const T>(b), ptr<T>(out), n);
    } else {
      const Dims d = coalesce(out.shape(), broadcast_strides(a.shape(), out.shape()),
                              broadcast_strides(b.shape(), out.shape()), "binary");
      binary_bcast<op, T>
          <<<blocks_for(n), kThreads, 0, ctx.stream>>>(ptr<const T>(a), ptr<const T>(b), ptr<T>(out), n, d);
    }
  });
  check_launch("binary");
}

template <typename T>
__global__ void unary_kernel(Unary op, float s, const T* x, T* o, int64_t n) {
  for (int64_t i = global_index(); i < n; i += grid_stride()) {
    const float v = to_f(x[i]);
    float r;
    switch (op) {
      case Unary::scale:
        r = v * s;
        break;
      case Unary::add_scalar:
        r = v + s;
        break;
      case Unary::relu:
        r = v > 0.f ? v : 0.f;
        break;
      case Unary::gelu:
        r = gelu_tanh(v);
        break;
      case Unary::gelu_erf:
        r = gelu_erf(v);
        break;
      default:
        r = tanh_approx(v);
        break;
    }
    o[i] = from_f<T>(r);
  }
}

template <typename T>
__global__ void unary_backward_kernel(Unary op, const T* dy, const T* x, T* o, int64_t n) {
  for (int64_t i = global_index(); i < n; i += grid_stride()) {
    const float d = to_f(dy[i]), v = to_f(x[i]);
    float r;
    switch (op) {
      case Unary::gelu:
        r = d * gelu_tanh_grad(v);
        break;
      case Unary::gelu_erf:
        r = d * gelu_erf_grad(v);
        break;
      case Unary::tanh: {
        const float t = tanh_approx(v);
        r = d * (1.f - t * t);
        break;
      }
      default:
        r = v > 0.f ? d : 0.f;
        break;
    }
    o[i] = from_f<T>(r);
  }
}

// sum_to: output element o sums g over the reduced dims; `kept` steps g's offset by o's
// coordinates (and orders them as out's), `red` walks the summed ones.
struct SumPlan {
  Dims kept, red;  // sa: g's strides; sb unused
  int64_t per_out = 1;
};

__device__ __forceinline__ int64_t offset_of(int64_t i, const Dims& d) {
  int64_t off = 0;
  for (int k = d.n - 1; k >= 0; --k) {
    off += (i % d.size[k]) * d.sa[k];
    i /= d.size[k];
  }
  return off;
}

// One thread per output element: the summation runs in g's order, as the CPU's.
template <typename T>
__global__ void sum_to_thread(const T* g, T* o, int64_t m, SumPlan p) {
  for (int64_t i = global_index(); i < m; i += grid_stride()) {
    const T* base = g + offset_of(i, p.kept);
    float s = 0.f;
    for (int64_t k = 0; k < p.per_out; ++k) s += to_f(base[offset_of(k, p.red)]);
    o[i] = from_f<T>(s);
  }
}

// One block per output element, for few outputs with long sums.
template <typename T>
__global__ void sum_to_block(const T* g, T* o, SumPlan p) {
  __shared__ float shm[32];
  const T* base = g + offset_of(blockIdx.x, p.kept);
  float s = 0.f;
  for (int64_t k = threadIdx.x; k < p.per_out; k += blockDim.x) s += to_f(base[offset_of(k, p.red)]);
  s = block_reduce(s, SumOp{}, 0.f, shm);
  if (threadIdx.x == 0) o[blockIdx.x] = from_f<T>(s);
}

// dh = dy * gelu'(h); block (x: columns, y: row block) keeps f32 column sums of its rows.
template <typename T>
__global__ void gelu_bias_rows(const T* dy, const T* h, bool erf, T* dh, float* part, int64_t rows, int64_t c,
                               int64_t rows_per) {
  const int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= c) return;
  const int64_t r0 = int64_t(blockIdx.y) * rows_per, r1 = min(rows, r0 + rows_per);
  float acc = 0.f;
  for (int64_t r = r0; r < r1; ++r) {
    const float v = to_f(h[r * c + j]);
    const float g = to_f(dy[r * c + j]) * (erf ? gelu_erf_grad(v) : gelu_tanh_grad(v));
    dh[r * c + j] = from_f<T>(g);
    acc += g;
  }
  part[int64_t(blockIdx.y) * c + j] = acc;
}

}  // namespace

void binary(Binary op, const Tensor& a, const Tensor& b, Tensor& out) {
  kern::with_binary(op, [&](auto o) { binary_impl<decltype(o)::value>(a, b, out); });
}

void unary(Unary op, float s, const Tensor& x, Tensor& out) {
  Ctx ctx(x);
  const int64_t n = x.numel();
  dispatch_float(x.dtype(), "unary", [&](auto tag) {
    using T = typename decltype(tag)::type;
    unary_kernel<T><<<blocks_for(n), kThreads, 0, ctx.stream>>>(op, s, ptr<const T>(x), ptr<T>(out), n);
  });
  check_launch("unary");
}

void unary_backward(Unary op, const Tensor& dy, const Tensor& x, Tensor& out) {
  ZT_CHECK(op == Unary::relu || op == Unary::gelu || op == Unary::gelu_erf || op == Unary::tanh,
           "[unary_backward] no backward kernel for this op");
  Ctx ctx(x);
  const int64_t n = x.numel();
  dispatch_float(x.dtype(), "unary_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    unary_backward_kernel<T><<<blocks_for(n), kThreads, 0, ctx.stream>>>(op, ptr<const T>(dy), ptr<const T>(x),
                                                                          ptr<T>(out), n);
  });
  check_launch("unary_backward");
}

void sum_to(const Tensor& g, Tensor& out) {
  Ctx ctx(out);
  const int64_t m = out.numel(), n = g.numel();
  if (n == 0) {  // nothing to sum: zeros
    ZT_CUDA_CHECK(cudaMemsetAsync(out.raw_data(), 0, out.nbytes(), ctx.stream));
    return;
  }
  // Split g's dims (coalesced, with out's strides) into kept (out stride != 0) and reduced ones.
  const Shape& gs = g.shape();
  const Shape so = broadcast_strides(out.shape(), gs), sg = contiguous_strides(gs);
  const Dims all = coalesce(gs, sg, so, "sum_to");
  SumPlan p;
  for (int k = 0; k < all.n; ++k) {
    Dims& d = all.sb[k] != 0 ? p.kept : p.red;
    d.size[d.n] = all.size[k];
    d.sa[d.n] = all.sa[k];
    d.sb[d.n] = 0;
    ++d.n;
    if (all.sb[k] == 0) p.per_out *= all.size[k];
  }
  dispatch_float(g.dtype(), "sum_to", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (m < 2048 && p.per_out >= 256)
      sum_to_block<T><<<unsigned(m), kThreads, 0, ctx.stream>>>(ptr<const T>(g), ptr<T>(out), p);
    else
      sum_to_thread<T><<<blocks_for(m), kThreads, 0, ctx.stream>>>(ptr<const T>(g), ptr<T>(out), m, p);
  });
  check_launch("sum_to");
}

// Note [fused bias-gelu] (CPU elementwise.cpp): dh and db in one pass over [rows, C]; each row
// block's f32 column sums go to a workspace, then add up in row-block order (no atomics).
void gelu_bias_backward(const Tensor& dy, const Tensor& h, bool erf, Tensor& dh, Tensor& db) {
  Ctx ctx(h);
  const int64_t c = h.size(-1), rows = h.numel() / c;
  const int64_t nb = std::clamp<int64_t>((rows + 31) / 32, 1, 1024), rows_per = (rows + nb - 1) / nb;
  // Freed after enqueueing: the stream orders any reuse of this memory after these kernels.
  Tensor part = workspace({nb, c}, DType::f32, h.device());
  dispatch_float(h.dtype(), "gelu_bias_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const dim3 grid(unsigned((c + kThreads - 1) / kThreads), unsigned(nb));
    gelu_bias_rows<T><<<grid, kThreads, 0, ctx.stream>>>(ptr<const T>(dy), ptr<const T>(h), erf,
                                                         ptr<T>(dh), ptr<float>(part), rows, c, rows_per);
  });
  check_launch("gelu_bias_backward");
  dispatch_float(db.dtype(), "gelu_bias_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    column_total<T><<<blocks_for(c), kThreads, 0, ctx.stream>>>(ptr<const float>(part), nb, c, ptr<T>(db));
  });
  check_launch("gelu_bias_backward");
}

}  // namespace zt::ops::cuda
