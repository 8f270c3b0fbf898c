// The backend operation graphs of cuDNN's fused flash attention (Note [cudnn attention] in
// attention_cudnn.cpp): the nodes cudnn-frontend's composite SDPA nodes lower to on cuDNN 9.19
// (before 9.21's single softmax and band-mask operations), in their order and with their tensor
// types, since cuDNN's attention engines recognise the graph by its pattern.
#include "sdpa_graph.h"

#include <array>
#include <vector>

namespace zt::ops::cuda::sdpa {

namespace {

using Desc = cudnnBackendDescriptor_t;
using Dims = std::array<int64_t, 4>;
constexpr cudnnDataType_t kF32 = CUDNN_DATA_FLOAT;

// A backend call that failed while building: cuDNN does not take this graph.
struct Refused {
  std::string why;
};

std::string status_text(cudnnStatus_t s, const char* what) {
  char detail[512] = {};
  cudnnGetLastErrorString(detail, sizeof detail);
  std::string m = std::string(what) + ": " + cudnnGetErrorString(s);
  if (detail[0]) m += std::string(" (") + detail + ")";
  return m;
}

void ok(cudnnStatus_t s, const char* what) {
  if (s != CUDNN_STATUS_SUCCESS) throw Refused{status_text(s, what)};
}

// Sets one attribute; a failure names it.
#define ZT_SDPA_SET(desc, attr, type, count, values) \
  ok(cudnnBackendSetAttribute((desc), (attr), (type), (count), (values)), #attr)

// One graph's descriptors: destroyed with it unless its plan finalized (then kept for the
// process, as the plan may refer to them).
class Graph {
 public:
  explicit Graph(cudnnHandle_t h) : h_(h) {}
  ~Graph() {
    if (keep_) return;
    for (auto it = all_.rbegin(); it != all_.rend(); ++it) cudnnBackendDestroyDescriptor(*it);
  }
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  // A finalized 4-d tensor: a variant-pack tensor where uid != 0, else virtual (next free UID).
  Desc tensor(cudnnDataType_t type, const Dims& dim, const Dims& stride, int64_t uid, bool by_value = false) {
    Desc d = make(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    const bool is_virtual = uid == 0, yes = true;
    const int64_t id = is_virtual ? next_uid_++ : uid, alignment = 16;
    ZT_SDPA_SET(d, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type);
    ZT_SDPA_SET(d, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dim.data());
    ZT_SDPA_SET(d, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, stride.data());
    ZT_SDPA_SET(d, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &id);
    ZT_SDPA_SET(d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &alignment);
    if (is_virtual) ZT_SDPA_SET(d, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &yes);
    if (by_value) ZT_SDPA_SET(d, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &yes);
    ok(cudnnBackendFinalize(d), "finalize a tensor");
    return d;
  }
  Desc virt(cudnnDataType_t type, const Dims& dim, const Dims& stride) { return tensor(type, dim, stride, 0); }
  // An f32 scalar passed by value at execution (a host pointer in the variant pack).
  Desc scalar(int64_t uid) { return tensor(kF32, {1, 1, 1, 1}, {1, 1, 1, 1}, uid, true); }

  // y = mode(x[, b[, t]]) computed in `prec` (BINARY_SELECT: t ? x : b); GEN_INDEX along `axis`.
  void pointwise(cudnnPointwiseMode_t mode, Desc x, Desc b, Desc t, Desc y, cudnnDataType_t prec = kF32,
                 int64_t axis = -1) {
    Desc pw = make(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
    ZT_SDPA_SET(pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode);
    ZT_SDPA_SET(pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec);
    if (mode == CUDNN_POINTWISE_GEN_INDEX) ZT_SDPA_SET(pw, CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis);
    ok(cudnnBackendFinalize(pw), "finalize a pointwise descriptor");
    Desc op = make(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
    ZT_SDPA_SET(op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &pw);
    ZT_SDPA_SET(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x);
    if (b) ZT_SDPA_SET(op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b);
    if (t) ZT_SDPA_SET(op, CUDNN_ATTR_OPERATION_POINTWISE_TDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &t);
    ZT_SDPA_SET(op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y);
    const float one = 1.f;
    ZT_SDPA_SET(op, CUDNN_ATTR_OPERATION_POINTWISE_ALPHA1, CUDNN_TYPE_FLOAT, 1, &one);
    ZT_SDPA_SET(op, CUDNN_ATTR_OPERATION_POINTWISE_ALPHA2, CUDNN_TYPE_FLOAT, 1, &one);
    add(op, "finalize a pointwise operation");
  }
  void unary(cudnnPointwiseMode_t mode, Desc x, Desc y) { pointwise(mode, x, nullptr, nullptr, y); }
  void binary(cudnnPointwiseMode_t mode, Desc x, Desc b, Desc y) { pointwise(mode, x, b, nullptr, y); }

  // c = a b over the last two dimensions (f32 accumulation), batch dimensions broadcast; m, n and
  // k (i32 [B, 1, 1, 1] where given) cut each batch's product to its sequences' lengths.
  void matmul(Desc a, Desc b, Desc c, Desc m = nullptr, Desc n = nullptr, Desc k = nullptr) {
    Desc mm = make(CUDNN_BACKEND_MATMUL_DESCRIPTOR);
    ZT_SDPA_SET(mm, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &kF32);
    ok(cudnnBackendFinalize(mm), "finalize a matmul descriptor");
    Desc op = make(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
    ZT_SDPA_SET(op, CUDNN_ATTR_OPERATION_MATMUL_ADESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &a);
    ZT_SDPA_SET(op, CUDNN_ATTR_OPERATION_MATMUL_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b);
    ZT_SDPA_SET(op, CUDNN_ATTR_OPERATION_MATMUL_CDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &c);
    ZT_SDPA_SET(op, CUDNN_ATTR_OPERATION_MATMUL_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &mm);
    if (m) ZT_SDPA_SET(op, CUDNN_ATTR_OPERATION_MATMUL_GEMM_M_OVERRIDE_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &m);
    if (n) ZT_SDPA_SET(op, CUDNN_ATTR_OPERATION_MATMUL_GEMM_N_OVERRIDE_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n);
    if (k) ZT_SDPA_SET(op, CUDNN_ATTR_OPERATION_MATMUL_GEMM_K_OVERRIDE_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &k);
    add(op, "finalize a matmul operation");
  }

  // y = x reduced (ADD or MAX) in f32 over the dimensions where y's extent is 1 (and, for grouped-
  // query attention's dK and dV, over each kv head's group of query heads, as the frontend asks).
  void reduce(cudnnReduceTensorOp_t mode, Desc x, Desc y) {
    Desc r = make(CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
    ZT_SDPA_SET(r, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &kF32);
    ZT_SDPA_SET(r, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &mode);
    const bool deterministic = false;  // the frontend's default, which it sets from 9.11
    if (cudnnGetVersion() >= 91100)
      ZT_SDPA_SET(r, CUDNN_ATTR_REDUCTION_IS_DETERMINISTIC, CUDNN_TYPE_BOOLEAN, 1, &deterministic);
    ok(cudnnBackendFinalize(r), "finalize a reduction descriptor");
    Desc op = make(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
    ZT_SDPA_SET(op, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x);
    ZT_SDPA_SET(op, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y);
    ZT_SDPA_SET(op, CUDNN_ATTR_OPERATION_REDUCTION_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &r);
    add(op, "finalize a reduction operation");
  }

  // y: x's elements under y's dimensions and strides (a transposed view here).
  void reshape(Desc x, Desc y) {
    Desc op = make(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR);
    ZT_SDPA_SET(op, CUDNN_ATTR_OPERATION_RESHAPE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x);
    ZT_SDPA_SET(op, CUDNN_ATTR_OPERATION_RESHAPE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y);
    add(op, "finalize a reshape operation");
  }

  // The operations so far as one graph; heuristics mode A's engine configs in their order, the
  // first whose execution plan finalizes (cuDNN supports it) within max_workspace bytes.
  Plan plan(int64_t max_workspace) {
    Desc graph = make(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    ZT_SDPA_SET(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, int64_t(ops_.size()), ops_.data());
    ZT_SDPA_SET(graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &h_);
    ok(cudnnBackendFinalize(graph), "finalize the operation graph");
    Desc heur = make(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
    const cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
    ZT_SDPA_SET(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph);
    ZT_SDPA_SET(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
    ok(cudnnBackendFinalize(heur), "finalize the heuristics query");
    int64_t n = 0;
    ok(cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &n, nullptr),
       "count the heuristics' engine configs");
    if (n <= 0) throw Refused{"cuDNN's heuristics offer no engine config for the graph"};
    std::vector<Desc> configs;  // made empty; the query fills them in
    for (int64_t i = 0; i < n; ++i) configs.push_back(make(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR));
    ok(cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, n, &n,
                                configs.data()),
       "get the heuristics' engine configs");
    std::string last = "cuDNN's heuristics offer no engine config for the graph";
    for (int64_t i = 0; i < n; ++i) {
      Desc plan = make(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
      int64_t ws = 0, count = 0;
      // The engine config alone, as the frontend builds a plan (the handle comes with the graph).
      cudnnStatus_t s = cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
                                                 CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &configs[size_t(i)]);
      if (s == CUDNN_STATUS_SUCCESS) s = cudnnBackendFinalize(plan);
      if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &count, &ws);
      if (s != CUDNN_STATUS_SUCCESS) {
        last = status_text(s, "an engine config's execution plan");
      } else if (ws > max_workspace) {
        last = "its plan needs " + std::to_string(ws >> 20) + " MiB of workspace, over the " +
               std::to_string(max_workspace >> 20) + " MiB allowed";
      } else {
        keep_ = true;
        return Plan{plan, ws, ""};
      }
    }
    throw Refused{last};
  }

 private:
  Desc make(cudnnBackendDescriptorType_t type) {
    Desc d = nullptr;
    ok(cudnnBackendCreateDescriptor(type, &d), "create a descriptor");
    all_.push_back(d);
    return d;
  }
  void add(Desc op, const char* what) {
    ok(cudnnBackendFinalize(op), what);
    ops_.push_back(op);
  }

  cudnnHandle_t h_;
  std::vector<Desc> all_, ops_;
  int64_t next_uid_ = 100;
  bool keep_ = false;
};

// The scores' shape [B, H, T, T] and a row statistic's [B, H, T, 1], with contiguous strides.
struct Shapes {
  Dims scores, scores_stride, row, row_stride;
  explicit Shapes(const kern::AttentionGeometry& g)
      : scores{g.B, g.H, g.T, g.T},
        scores_stride{g.H * g.T * g.T, g.T * g.T, g.T, 1},
        row{g.B, g.H, g.T, 1},
        row_stride{g.H * g.T, g.T, 1, 1} {}
};

// The scores' row (axis 2, the query) or column (axis 3, the key) index, int32, computed in `prec`.
Desc index(Graph& gr, const Shapes& sh, Desc s, int64_t axis, cudnnDataType_t prec) {
  Desc i = gr.virt(CUDNN_DATA_INT32, sh.scores, sh.scores_stride);
  gr.pointwise(CUDNN_POINTWISE_GEN_INDEX, s, nullptr, nullptr, i, prec, axis);
  return i;
}

// mode(a, b) over the scores (a comparison or LOGICAL_AND), boolean.
Desc boolean(Graph& gr, const Shapes& sh, cudnnPointwiseMode_t mode, Desc a, Desc b) {
  Desc y = gr.virt(CUDNN_DATA_BOOLEAN, sh.scores, sh.scores_stride);
  gr.pointwise(mode, a, b, nullptr, y, CUDNN_DATA_BOOLEAN);
  return y;
}

// s where keep, else the by-value fill (-inf) bound to UID `fill`.
Desc select(Graph& gr, const Shapes& sh, Desc s, Desc keep, int64_t fill) {
  Desc y = gr.virt(kF32, sh.scores, sh.scores_stride);
  gr.pointwise(CUDNN_POINTWISE_BINARY_SELECT, s, gr.scalar(fill), keep, y);
  return y;
}

// cudnn-frontend's causal mask (a top-left diagonal band with right bound 0): s where the query's
// index (axis 2) is at least the key's (axis 3), -inf elsewhere.
Desc causal_mask(Graph& gr, const Shapes& sh, Desc s) {
  Desc row = index(gr, sh, s, 2, kF32);
  Desc col = index(gr, sh, s, 3, kF32);
  return select(gr, sh, s, boolean(gr, sh, CUDNN_POINTWISE_CMP_GE, row, col), kNegInf);
}

// Each sequence's lengths where a key mask is given (queries, keys before the padding), else none.
struct Lengths {
  Desc q = nullptr, kv = nullptr;
  Lengths(Graph& gr, const kern::AttentionGeometry& g) {
    if (!g.mask) return;
    q = gr.tensor(CUDNN_DATA_INT32, {g.B, 1, 1, 1}, {1, 1, 1, 1}, kSeqQ);
    kv = gr.tensor(CUDNN_DATA_INT32, {g.B, 1, 1, 1}, {1, 1, 1, 1}, kSeqKV);
  }
};

// cudnn-frontend's padding mask: s where the query's index (axis 2) is below its sequence's
// query length and the key's (axis 3) below its key length, -inf elsewhere (indices in int32).
Desc padding_mask(Graph& gr, const Shapes& sh, const Lengths& len, Desc s) {
  Desc row = index(gr, sh, s, 2, CUDNN_DATA_INT32);
  Desc col = index(gr, sh, s, 3, CUDNN_DATA_INT32);
  Desc row_in = boolean(gr, sh, CUDNN_POINTWISE_CMP_LT, row, len.q);
  Desc col_in = boolean(gr, sh, CUDNN_POINTWISE_CMP_LT, col, len.kv);
  return select(gr, sh, s, boolean(gr, sh, CUDNN_POINTWISE_LOGICAL_AND, row_in, col_in), kPadFill);
}

// Q [B, H, T, D], K^T [B, K, D, T] and V [B, K, T, D] in place in qkv's rows (row stride W), O in
// out's [B, T, H D] rows. S = scale Q K^T, masked; softmax as max, exp(S - max), sum, Stats =
// max + log(sum), P = exp / sum (16-bit); O = P V.
void forward_graph(Graph& gr, const kern::AttentionGeometry& g, cudnnDataType_t io) {
  const Shapes sh(g);
  const Dims in_stride{g.T * g.W, g.D, g.W, 1};
  Desc q = gr.tensor(io, {g.B, g.H, g.T, g.D}, in_stride, kQ);
  Desc kt = gr.tensor(io, {g.B, g.K, g.D, g.T}, {g.T * g.W, g.D, 1, g.W}, kK);
  Desc v = gr.tensor(io, {g.B, g.K, g.T, g.D}, in_stride, kV);
  Desc o = gr.tensor(io, {g.B, g.H, g.T, g.D}, {g.T * g.H * g.D, g.D, g.H * g.D, 1}, kO);
  Desc stats = gr.tensor(kF32, sh.row, sh.row_stride, kStats);
  const Lengths len(gr, g);
  Desc s = gr.virt(kF32, sh.scores, sh.scores_stride);
  gr.matmul(q, kt, s, len.q, len.kv);
  Desc scaled = gr.virt(kF32, sh.scores, sh.scores_stride);
  gr.binary(CUDNN_POINTWISE_MUL, s, gr.scalar(kScale), scaled);
  if (g.mask) scaled = padding_mask(gr, sh, len, scaled);
  if (g.causal) scaled = causal_mask(gr, sh, scaled);
  Desc max = gr.virt(kF32, sh.row, sh.row_stride), sum = gr.virt(kF32, sh.row, sh.row_stride);
  Desc log = gr.virt(kF32, sh.row, sh.row_stride);
  Desc centred = gr.virt(kF32, sh.scores, sh.scores_stride), e = gr.virt(kF32, sh.scores, sh.scores_stride);
  Desc p = gr.virt(io, sh.scores, sh.scores_stride);
  gr.reduce(CUDNN_REDUCE_TENSOR_MAX, scaled, max);
  gr.binary(CUDNN_POINTWISE_SUB, scaled, max, centred);
  gr.unary(CUDNN_POINTWISE_EXP, centred, e);
  gr.reduce(CUDNN_REDUCE_TENSOR_ADD, e, sum);
  gr.unary(CUDNN_POINTWISE_LOG, sum, log);
  gr.binary(CUDNN_POINTWISE_ADD, max, log, stats);
  gr.binary(CUDNN_POINTWISE_DIV, e, sum, p);
  gr.matmul(p, v, o, len.q, nullptr, len.kv);
}

// As the forward's, plus O, dO (out's layout), Stats, and dQ, dK, dV in dqkv's rows. Dot = rowsum
// (dO * O) (non-virtual scratch); P = exp(scale Q K^T - Stats), masked; dV = P^T dO; dS = P (dO
// V^T - Dot) scale; dK = dS^T Q; dQ = dS K straight into dQ (no f32 dQ accumulator: the frontend's
// deterministic form). Grouped-query attention: dK and dV per query head, then summed over each
// kv head's group (a reduction), as the frontend does.
void backward_graph(Graph& gr, const kern::AttentionGeometry& g, cudnnDataType_t io) {
  const Shapes sh(g);
  const Dims in_stride{g.T * g.W, g.D, g.W, 1}, out_stride{g.T * g.H * g.D, g.D, g.H * g.D, 1};
  const Dims kt_dim{g.B, g.K, g.D, g.T}, kt_stride{g.T * g.W, g.D, 1, g.W};
  const Dims q_dim{g.B, g.H, g.T, g.D}, kv_dim{g.B, g.K, g.T, g.D};
  const Dims transposed{g.H * g.T * g.T, g.T * g.T, 1, g.T};       // [B, H, T, T] read as S^T
  const Dims per_head_stride{g.H * g.T * g.D, g.T * g.D, g.D, 1};  // dK, dV per query head
  Desc q = gr.tensor(io, q_dim, in_stride, kQ), kt = gr.tensor(io, kt_dim, kt_stride, kK);
  Desc vt = gr.tensor(io, kt_dim, kt_stride, kV), o = gr.tensor(io, q_dim, out_stride, kO);
  Desc d_o = gr.tensor(io, q_dim, out_stride, kDO), stats = gr.tensor(kF32, sh.row, sh.row_stride, kStats);
  Desc dq = gr.tensor(io, q_dim, in_stride, kDQ), dk = gr.tensor(io, kv_dim, in_stride, kDK);
  Desc dv = gr.tensor(io, kv_dim, in_stride, kDV), scale = gr.scalar(kScale);
  Desc dot = gr.tensor(kF32, sh.row, sh.row_stride, kDot);
  const Lengths len(gr, g);
  // Dot = sum over features of dO * O (the frontend's strides for the virtual product)
  Desc prod = gr.virt(kF32, q_dim, {g.H * g.T * g.D, g.T * g.D, g.H * g.D, 1});
  Desc rowsum = gr.virt(kF32, sh.row, sh.row_stride);
  gr.binary(CUDNN_POINTWISE_MUL, d_o, o, prod);
  gr.reduce(CUDNN_REDUCE_TENSOR_ADD, prod, rowsum);
  gr.binary(CUDNN_POINTWISE_MUL, rowsum, gr.scalar(kOne), dot);
  // P = exp(scale S - Stats), masked
  Desc s = gr.virt(kF32, sh.scores, sh.scores_stride), scaled = gr.virt(kF32, sh.scores, sh.scores_stride);
  Desc shifted = gr.virt(kF32, sh.scores, sh.scores_stride), p = gr.virt(kF32, sh.scores, sh.scores_stride);
  gr.matmul(q, kt, s, len.q, len.kv);
  gr.binary(CUDNN_POINTWISE_MUL, s, scale, scaled);
  if (g.mask) scaled = padding_mask(gr, sh, len, scaled);
  gr.binary(CUDNN_POINTWISE_SUB, scaled, stats, shifted);
  if (g.causal) shifted = causal_mask(gr, sh, shifted);
  gr.unary(CUDNN_POINTWISE_EXP, shifted, p);
  // dK or dV = lhs rhs: straight into the kv heads' gradient, or per query head, then summed over
  // each kv head's group (grouped-query attention). Rows are keys, the sum over queries.
  auto kv_grad = [&](Desc lhs, Desc rhs, Desc out) {
    if (g.H == g.K) return gr.matmul(lhs, rhs, out, len.kv, nullptr, len.q);
    Desc heads = gr.virt(io, q_dim, per_head_stride);
    gr.matmul(lhs, rhs, heads, len.kv, nullptr, len.q);
    gr.reduce(CUDNN_REDUCE_TENSOR_ADD, heads, out);
  };
  // dV = P^T dO
  Desc pt = gr.virt(io, sh.scores, transposed);
  gr.reshape(p, pt);
  kv_grad(pt, d_o, dv);
  // dS = P (dO V^T - Dot) scale
  Desc dp = gr.virt(kF32, sh.scores, sh.scores_stride), centred = gr.virt(kF32, sh.scores, sh.scores_stride);
  Desc weighted = gr.virt(kF32, sh.scores, sh.scores_stride), ds = gr.virt(kF32, sh.scores, sh.scores_stride);
  gr.matmul(d_o, vt, dp, len.q, len.kv);
  gr.binary(CUDNN_POINTWISE_SUB, dp, dot, centred);
  gr.binary(CUDNN_POINTWISE_MUL, centred, p, weighted);
  gr.binary(CUDNN_POINTWISE_MUL, weighted, scale, ds);
  // dK = dS^T Q
  Desc dst = gr.virt(io, sh.scores, transposed);
  gr.reshape(ds, dst);
  kv_grad(dst, q, dk);
  // dQ = dS K (K^T viewed back as K; f32 as the frontend leaves this virtual view)
  Desc k = gr.virt(kF32, kv_dim, in_stride);
  gr.reshape(kt, k);
  gr.matmul(ds, k, dq, len.q, nullptr, len.kv);
}

}  // namespace

Plan build(cudnnHandle_t handle, const kern::AttentionGeometry& g, cudnnDataType_t io, bool backward,
           int64_t max_workspace) {
  try {
    Graph gr(handle);
    if (backward)
      backward_graph(gr, g, io);
    else
      forward_graph(gr, g, io);
    return gr.plan(max_workspace);
  } catch (const Refused& r) {
    return Plan{nullptr, 0, r.why};
  }
}

#undef ZT_SDPA_SET

}  // namespace zt::ops::cuda::sdpa
