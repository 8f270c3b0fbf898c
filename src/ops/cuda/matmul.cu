// CUDA matrix products through cuBLASLt: out = op(a) @ op(b) (+ bias), 2-D or batched 3-D, f32
// compute for every dtype (bf16/f16 on tensor cores), heuristics cached per shape and alignment.
#include <cublasLt.h>

#include <cstring>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "../mat_view.h"
#include "common.cuh"

namespace zt::ops::cuda {

namespace {

void lt_check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) ZT_THROW_AS(ErrorKind::internal, "[cuda] ", what, ": ", cublasLtGetStatusString(s));
}
#define ZT_LT_CHECK(expr) lt_check((expr), #expr)

constexpr size_t kWorkspaceBytes = size_t(32) << 20;

// One cuBLASLt handle and workspace per GPU, made on first use and kept for the process (the
// workspace is cudaMalloc'd, as cuBLAS's own; every product is ordered on the one stream).
struct DeviceState {
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
};

DeviceState& device_state(int index) {
  static std::mutex mu;
  static auto* states = new std::unordered_map<int, DeviceState>();  // never destroyed
  std::lock_guard<std::mutex> lock(mu);
  DeviceState& s = (*states)[index];
  if (!s.handle) {
    ZT_LT_CHECK(cublasLtCreate(&s.handle));
    ZT_CUDA_CHECK(cudaMalloc(&s.workspace, kWorkspaceBytes));
  }
  return s;
}

using detail::describe;
using detail::Mat;

bool row_major(const Mat& m) { return m.sc == 1 && m.sr >= m.c; }
bool col_major(const Mat& m) { return m.sr == 1 && m.sc >= m.r; }

// cuBLASLt needs a unit stride per matrix; other views (rare) are copied contiguous first.
Mat make_plain(const Tensor& t, bool trans) {
  Mat m = describe(t, trans);
  return row_major(m) || col_major(m) ? m : describe(t.contiguous(), trans);
}

// Logical X [r, c] as the column-major operand op(stored) = X^T [c, r], which is what
// C^T = B^T A^T (the row-major product in column-major terms) takes.
struct Operand {
  cublasOperation_t op;
  int64_t rows, cols, ld, batch_stride;
};
Operand transposed(const Mat& m) {
  if (row_major(m)) return {CUBLAS_OP_N, m.c, m.r, m.sr, m.sb};  // memory is X^T, column-major
  return {CUBLAS_OP_T, m.r, m.c, m.sc, m.sb};                     // memory is X, column-major
}

cudaDataType_t lt_type(DType dt) {
  switch (dt) {
    case DType::bf16:
      return CUDA_R_16BF;
    case DType::f16:
      return CUDA_R_16F;
    default:
      return CUDA_R_32F;
  }
}

// The largest power of two (<= 256) dividing the address and the batch stride in bytes (0: none).
int64_t alignment(const void* p, int64_t batch_stride_bytes) {
  const uint64_t a = uint64_t(reinterpret_cast<uintptr_t>(p)) | uint64_t(batch_stride_bytes) | 256u;
  return int64_t(a & (~a + 1));
}

struct Layout {
  cublasLtMatrixLayout_t l = nullptr;
  Layout(cudaDataType_t type, int64_t rows, int64_t cols, int64_t ld, int64_t batch, int64_t stride) {
    ZT_LT_CHECK(cublasLtMatrixLayoutCreate(&l, type, uint64_t(rows), uint64_t(cols), ld));
    if (batch > 1) {
      const int32_t count = int32_t(batch);
      ZT_LT_CHECK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count));
      ZT_LT_CHECK(
          cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride));
    }
  }
  ~Layout() { (void)cublasLtMatrixLayoutDestroy(l); }
  Layout(const Layout&) = delete;
  Layout& operator=(const Layout&) = delete;
};

// A matmul descriptor (made per call: it carries the bias pointer; cheap host object).
struct OpDesc {
  cublasLtMatmulDesc_t d = nullptr;
  OpDesc(cublasOperation_t ta, cublasOperation_t tb, const void* bias) {
    ZT_LT_CHECK(cublasLtMatmulDescCreate(&d, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    ZT_LT_CHECK(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    ZT_LT_CHECK(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    if (bias) {
      const cublasLtEpilogue_t e = CUBLASLT_EPILOGUE_BIAS;
      ZT_LT_CHECK(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof e));
      ZT_LT_CHECK(cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
    }
  }
  ~OpDesc() { (void)cublasLtMatmulDescDestroy(d); }
  OpDesc(const OpDesc&) = delete;
  OpDesc& operator=(const OpDesc&) = delete;
};

// A cached plan: the layouts and the heuristic's algorithm (found == false: none fits).
struct Plan {
  std::unique_ptr<Layout> a, b, d;
  cublasLtMatmulAlgo_t algo{};
  bool found = false;
};

// One product D = op(A) op(B) in cuBLASLt's terms, with everything that selects a plan.
struct Problem {
  int device;
  cudaDataType_t in, out;
  Operand a, b;          // cuBLASLt's A (from our b) and B (from our a)
  int64_t m, n, k, batch;  // D is m x n column-major (m = our N, n = our M), ld m
  const void *pa, *pb, *bias;
  void* pd;
};

const Plan& plan_for(const Problem& p, DeviceState& st, const OpDesc& desc) {
  const size_t in_size = p.in == CUDA_R_32F ? 4 : 2, out_size = p.out == CUDA_R_32F ? 4 : 2;
  const int64_t batched = p.batch > 1 ? 1 : 0;  // batch strides matter only with batches
  const int64_t al_a = alignment(p.pa, batched * p.a.batch_stride * int64_t(in_size));
  const int64_t al_b = alignment(p.pb, batched * p.b.batch_stride * int64_t(in_size));
  const int64_t al_d = alignment(p.pd, batched * p.m * p.n * int64_t(out_size));
  const int64_t al_bias = p.bias ? alignment(p.bias, 0) : 0;
  const std::vector<int64_t> key{p.device,   int64_t(p.in),       int64_t(p.out),   int64_t(p.a.op), p.a.rows,
                                 p.a.cols,   p.a.ld,              p.a.batch_stride, int64_t(p.b.op), p.b.rows,
                                 p.b.cols,   p.b.ld,              p.b.batch_stride, p.m,             p.n,
                                 p.k,        p.batch,             al_a,             al_b,            al_d,
                                 al_bias};
  PlanCache<Plan>& c = PlanCache<Plan>::get();
  std::lock_guard<std::mutex> lock(c.mu);
  auto it = c.plans.find(key);
  if (it != c.plans.end()) return *it->second;
  auto plan = std::make_unique<Plan>();
  plan->a = std::make_unique<Layout>(p.in, p.a.rows, p.a.cols, p.a.ld, p.batch, p.a.batch_stride);
  plan->b = std::make_unique<Layout>(p.in, p.b.rows, p.b.cols, p.b.ld, p.batch, p.b.batch_stride);
  plan->d = std::make_unique<Layout>(p.out, p.m, p.n, p.m, p.batch, p.m * p.n);
  cublasLtMatmulPreference_t pref = nullptr;
  ZT_LT_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  const uint64_t ws = kWorkspaceBytes;
  const uint32_t aa = uint32_t(al_a), ab = uint32_t(al_b), ad = uint32_t(al_d);
  ZT_LT_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
  ZT_LT_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &aa, sizeof aa));
  ZT_LT_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &ab, sizeof ab));
  ZT_LT_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &ad, sizeof ad));
  ZT_LT_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &ad, sizeof ad));
  cublasLtMatmulHeuristicResult_t result{};
  int returned = 0;
  const cublasStatus_t s = cublasLtMatmulAlgoGetHeuristic(st.handle, desc.d, plan->a->l, plan->b->l, plan->d->l,
                                                          plan->d->l, pref, 1, &result, &returned);
  (void)cublasLtMatmulPreferenceDestroy(pref);
  plan->found = s == CUBLAS_STATUS_SUCCESS && returned > 0 && result.state == CUBLAS_STATUS_SUCCESS;
  if (plan->found) plan->algo = result.algo;
  return *c.plans.emplace(key, std::move(plan)).first->second;
}

// Runs the product; false when cuBLASLt has no algorithm for it (with a bias: try without).
bool run(const Problem& p, cudaStream_t stream) {
  DeviceState& st = device_state(p.device);
  const OpDesc desc(p.a.op, p.b.op, p.bias);
  const Plan& plan = plan_for(p, st, desc);
  if (!plan.found) return false;
  const float alpha = 1.f, beta = 0.f;
  ZT_LT_CHECK(cublasLtMatmul(st.handle, desc.d, &alpha, p.pa, plan.a->l, p.pb, plan.b->l, &beta, p.pd, plan.d->l,
                             p.pd, plan.d->l, &plan.algo, st.workspace, kWorkspaceBytes, stream));
  return true;
}

// out[e] = (d32 ? d32[e] : 0) + bias[e % n], rounded once (d32 may alias an f32 out).
template <typename T>
__global__ void add_bias_kernel(const float* d32, const T* bias, T* out, int64_t total, int64_t n) {
  for (int64_t e = global_index(); e < total; e += grid_stride())
    out[e] = from_f<T>((d32 ? d32[e] : 0.f) + to_f(bias[e % n]));
}

void add_bias(const float* d32, const Tensor& bias, Tensor& out, cudaStream_t stream) {
  const int64_t total = out.numel(), n = out.size(-1);
  dispatch_float(out.dtype(), "matmul", [&](auto tag) {
    using T = typename decltype(tag)::type;
    add_bias_kernel<T><<<blocks_for(total), kThreads, 0, stream>>>(d32, ptr<const T>(bias), ptr<T>(out), total, n);
  });
  check_launch("matmul");
}

// The product for plain operands a and b: the bias in cuBLASLt's epilogue (added in f32 before
// the one rounding) where it is 16-byte aligned, else an f32 product then a bias kernel. False
// when cuBLASLt has no algorithm at all.
bool product(const Mat& a, const Mat& b, const Tensor* bias, Tensor& out, cudaStream_t stream) {
  Problem p{};
  p.device = out.device().index;
  p.in = lt_type(a.t.dtype());
  p.out = lt_type(out.dtype());
  p.a = transposed(b);  // C^T = B^T A^T: cuBLASLt's A is our B^T
  p.b = transposed(a);
  p.m = b.c;
  p.n = a.r;
  p.k = a.c;
  p.batch = a.b;
  p.pa = b.t.raw_data();
  p.pb = a.t.raw_data();
  p.pd = out.raw_data();
  // The epilogue takes a 16-byte aligned bias; another (a view at any offset of a flat buffer)
  // is added by add_bias below, never dropped.
  const bool fuse = bias && alignment(bias->raw_data(), 0) >= 16;
  p.bias = fuse ? bias->raw_data() : nullptr;
  if ((fuse || !bias) && run(p, stream)) return true;
  p.bias = nullptr;
  Tensor d32 = out.dtype() == DType::f32 || !bias ? out : workspace(out.shape(), DType::f32, out.device());
  p.out = lt_type(d32.dtype());
  p.pd = d32.raw_data();
  if (!run(p, stream)) return false;
  // d32 (a workspace for 16-bit out) is freed after enqueueing: the stream orders its reuse.
  if (bias) add_bias(ptr<const float>(d32), *bias, out, stream);
  return true;
}

// Note [padded products]: a 16-bit product whose extents or leading dimensions are not multiples
// of 8 elements (GPT-2's vocabulary, 50257) runs on cuBLASLt's slow "align1" kernels. A large one
// copies such operands into zero-filled buffers with every extent padded to 8 (the zeros add
// nothing to the sums) and writes through a padded result copied back: each copy costs a few
// percent of the product it makes several times faster.
constexpr int64_t kPadTo = 8;
constexpr int64_t kPadMinMacs = int64_t(1) << 27;
int64_t padded(int64_t n) { return (n + kPadTo - 1) / kPadTo * kPadTo; }

bool aligned(const Mat& m) {
  return m.r % kPadTo == 0 && m.c % kPadTo == 0 && (row_major(m) ? m.sr : m.sc) % kPadTo == 0;
}

// Plain m as a rows x cols matrix in m's own layout: m's elements, zeros beyond. Freed after
// enqueueing, as every workspace here (the stream orders its reuse).
Mat pad_to(const Mat& m, int64_t rows, int64_t cols, cudaStream_t stream) {
  const bool rm = row_major(m);
  Tensor buf = workspace(rm ? Shape{rows, cols} : Shape{cols, rows}, m.t.dtype(), m.t.device());
  const size_t es = dtype_size(m.t.dtype());
  ZT_CUDA_CHECK(cudaMemsetAsync(buf.raw_data(), 0, buf.nbytes(), stream));
  ZT_CUDA_CHECK(cudaMemcpy2DAsync(buf.raw_data(), size_t(rm ? cols : rows) * es, m.t.raw_data(),
                                  size_t(rm ? m.sr : m.sc) * es, size_t(rm ? m.c : m.r) * es, size_t(rm ? m.r : m.c),
                                  cudaMemcpyDeviceToDevice, stream));
  return describe(buf, !rm);
}

// The product through padded operands and result (Note [padded products]); false where it does
// not apply or cuBLASLt has no algorithm even so.
bool padded_product(const Mat& a, const Mat& b, const Tensor* bias, Tensor& out, cudaStream_t stream) {
  const int64_t M = a.r, K = a.c, N = b.c;
  if (a.t.dtype() == DType::f32 || a.b != 1 || M * K * N < kPadMinMacs) return false;
  if ((aligned(a) && aligned(b)) || (bias && N % kPadTo != 0)) return false;  // nothing to pad, or the bias too
  const Mat pa = aligned(a) ? a : pad_to(a, padded(M), padded(K), stream);
  const Mat pb = aligned(b) ? b : pad_to(b, padded(K), padded(N), stream);
  if (pa.r == M && pb.c == N) return product(pa, pb, bias, out, stream);
  Tensor d = workspace({pa.r, pb.c}, out.dtype(), out.device());
  if (!product(pa, pb, bias, d, stream)) return false;
  const size_t es = dtype_size(out.dtype());
  ZT_CUDA_CHECK(cudaMemcpy2DAsync(out.raw_data(), size_t(N) * es, d.raw_data(), size_t(pb.c) * es, size_t(N) * es,
                                  size_t(M), cudaMemcpyDeviceToDevice, stream));
  return true;
}

}  // namespace

void matmul(const Tensor& at, bool trans_a, const Tensor& bt, bool trans_b, const Tensor* bias, Tensor& out) {
  Ctx ctx(out);
  const Tensor bias_c = bias ? bias->contiguous() : Tensor();
  const Tensor* pb = bias ? &bias_c : nullptr;
  const Mat a = make_plain(at, trans_a), b = make_plain(bt, trans_b);
  if (a.c == 0) {  // empty inner dimension: the product is zero (plus the bias)
    ZT_CUDA_CHECK(cudaMemsetAsync(out.raw_data(), 0, out.nbytes(), ctx.stream));
    if (bias) add_bias(nullptr, bias_c, out, ctx.stream);
    return;
  }
  if (padded_product(a, b, pb, out, ctx.stream) || product(a, b, pb, out, ctx.stream)) return;
  // No algorithm (e.g. a 16-bit operand at an odd offset inside a flat buffer): aligned copies,
  // freed after enqueueing (the stream orders their reuse).
  const Tensor ac = at.clone(MemTag::workspace), bc = bt.clone(MemTag::workspace);
  ZT_CHECK_AS(ErrorKind::internal, product(describe(ac, trans_a), describe(bc, trans_b), pb, out, ctx.stream),
              "[matmul] cuBLASLt has no algorithm for ", shape_str(at.shape()), trans_a ? "^T" : "", " @ ",
              shape_str(bt.shape()), trans_b ? "^T" : "", " in ", dtype_name(out.dtype()));
}

}  // namespace zt::ops::cuda
