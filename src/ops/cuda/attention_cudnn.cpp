// Attention through cuDNN's fused flash attention (cuDNN 9's backend graph API, no cudnn-frontend):
// forward and backward for bf16 and f16, causal or not, key-masked or not, one execution plan per shape.
//
// Note [cudnn attention]: attention.cu tries this path before its own kernels. cuDNN's attention
// engines recognise an operation graph by its pattern, so sdpa_graph.cpp builds exactly the
// nodes cudnn-frontend's composite SDPA nodes lower to on cuDNN 9.19, in their order and with
// their tensor types (virtual tensors f32, but 16-bit for the forward's P and the backward's
// transposed P and dS and per-head dK and dV; indices int32, the mask boolean):
//   forward: S = Q K^T (matmul, f32 accumulation); S * scale (a by-value f32); causal: row and
//     column indices (GEN_INDEX, axes 2 and 3), row >= col (CMP_GE), BINARY_SELECT of S or a
//     by-value -inf; softmax: max (reduction), S - max, exp, sum (reduction), Stats = max +
//     log(sum), P = exp / sum (16-bit); O = P V.
//   backward: Dot = sum over features of dO * O (times a by-value 1) into an f32 scratch the
//     caller provides; P = exp(S * scale - Stats), masked as above; dV = P^T dO (a reshape to the
//     transposed view, then a matmul); dS = P (dO V^T - Dot) scale; dK = dS^T Q; dQ = dS K.
//     With fewer kv heads, dK and dV are made per query head and summed over each group
//     (a reduction); the forward's matmuls broadcast the kv heads themselves.
// Layout: Q, K and V are read in place from qkv's [B, T, W] rows: Q [B, H, T, D] with strides
// [T W, D, W, 1], K given transposed as K^T [B, K, D, T] with strides [T W, D, 1, W] (the form
// cuDNN's first matmul takes), V [B, K, T, D] like Q, at element offsets 0, H D and (H + K) D.
// O and dO are [B, H, T, D] with strides [T H D, D, H D, 1] over out's [B, T, H D] rows; dQ, dK
// and dV are the same views of dqkv, which the backward therefore writes whole. Every tensor is
// declared 16-byte aligned; the calls check their base pointers (head sizes that are multiples
// of 8 keep the K and V offsets and the row strides aligned).
// Stats is our lse: the composite softmax writes max + log(sum(exp(s - max))) over each query's
// scaled, masked scores, with natural exp and log (no log2 form, not max and sum apart), f32
// [B, H, T, 1] with strides [H T, T, 1, 1], which is lse's [B, H, T] exactly; the forward writes
// it straight into lse. The backward still takes cuDNN only where the forward did: the same
// refusal and a cached forward plan for the shape (so it reads cuDNN's own Stats).
// Determinism: cudnn-frontend's set_deterministic_algorithm is no backend attribute; it changes the
// graph: dQ straight out of the dS K matmul, where the default graph has that matmul write an f32
// dQ accumulator (a non-virtual workspace tensor filled with atomics) and an IDENTITY pointwise
// round it into dQ. We build only the deterministic form, which cuDNN runs with dP kept in
// workspace (about B H T T 2 bytes, quadratic in T); plans needing more than 256 MiB of it (the
// value of CUDNN_FRONTEND_ATTN_DP_WORKSPACE_LIMIT, which the frontend applies to cuDNN 8.9.5-9.0),
// or 1/32 of the device's memory where that is more, are refused: the own kernels run them. On
// Blackwell (compute capability 10 and up) the frontend also pins an engine and its knobs, which
// this file does not do, so the backward refuses there (the forward runs).
// Plans: heuristics mode A, then its engine configs in order, the first whose execution plan
// finalizes; cached per (device, dtype, B, T, H, K, D, causal, key mask, direction) under a mutex, kept
// for the process with their descriptors (one cuDNN handle per GPU, cudnn_common.h, given the
// device's stream at each call); the workspace comes from the caching allocator.
// Refused (the own kernels run, nothing is thrown): ZT_CUDNN_ATTENTION=0 (read once); a cuDNN
// library older than 9.10.2 (the frontend's known bugs, and its older mask value); f32 (cuDNN's
// fused attention is 16-bit); head sizes that are not a multiple of 8 or exceed 128 (the backward's
// limit off Hopper); T = 1 (the backward does not take one query and one key); T not a multiple of
// 128 on cuDNN up to 9.15.0 (where the frontend patches the backward with a padding mask); and, at
// run time, unaligned pointers, a GPU before Ampere, a shape no plan finalizes for (remembered,
// said once on stderr), the backward on Blackwell or without the forward, and a non-causal backward
// on Hopper before cuDNN 9.26 with T = 64 mod 128 (cudnn-frontend #628: the zero tail of K and V
// goes unmasked into exp and can make dQ NaN). Errors while executing a plan throw. One cuDNN
// handle serves a GPU, so setting its stream and executing hold a mutex.
// A key mask takes cuDNN's padding mask (Note [cudnn padding mask]).
// This path has never run on a GPU in this repository: it is compiled only, its attributes checked
// against cuDNN 9.19's headers and cudnn-frontend's source, not against an engine;
// ZT_CUDNN_ATTENTION=0 lets a GPU check compare it with the own kernels.
//
// Note [cudnn padding mask]: cuDNN masks padding by each sequence's lengths (i32 [B, 1, 1, 1] of
// queries and of keys: every product is cut to them by the matmuls' M, N and K overrides, and
// scores past them get -inf, as cudnn-frontend's padding_mask lowers), where our key mask is one
// flag per key. They agree where a sequence's mask is right padding: ones, then zeros, at least
// one key. attention.cu reads that on the device, with no wait for the host: a small kernel
// writes the query lengths (all T), the key lengths (the ones' count, or T elsewhere) and a flag
// per sequence whose mask is not right padding; cuDNN runs every sequence, then the own kernels
// run again over the flagged ones only (AttentionGeometry::only; a sequence's blocks return at
// once elsewhere), writing their out and lse, or their dqkv, whole. The backward zeroes dqkv
// first, since cuDNN may leave the rows of padded keys unwritten (their gradient is zero).
#include "attention_cudnn.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "cudnn_common.h"
#include "sdpa_graph.h"

namespace zt::ops::cuda::attn {

namespace {

// The deterministic backward's workspace (dP, about B H T T 2 bytes) at most: the frontend's 256
// MiB, or 1/32 of the device's memory where that is more (64 x 1024 tokens of GPT-2 need 1.5 GiB).
int64_t max_workspace(Device dev) {
  cudaDeviceProp prop{};
  const int64_t floor = int64_t(256) << 20;
  if (cudaGetDeviceProperties(&prop, dev.index) != cudaSuccess) return floor;
  return std::max(floor, int64_t(prop.totalGlobalMem / 32));
}

bool enabled() {
  static const bool on = [] {
    const char* v = std::getenv("ZT_CUDNN_ATTENTION");
    return !(v && std::strcmp(v, "0") == 0);
  }();
  return on;
}

// A shape's plan, or a refusal (plan null).
struct Entry {
  cudnnBackendDescriptor_t plan = nullptr;
  int64_t workspace = 0;
};

using Key = std::array<int64_t, 10>;  // device, dtype, B, T, H, K, D, causal, key mask, backward

Key key_of(Device dev, DType dt, const Geo& g, bool backward) {
  return {dev.index, int64_t(dt), g.B, g.T, g.H, g.K, g.D, int64_t(g.causal), int64_t(g.mask != nullptr),
          int64_t(backward)};
}

struct Cache {
  std::mutex mu;
  std::map<Key, Entry> entries;  // never erased: entries' addresses stay valid
};
Cache& cache() {
  static auto* c = new Cache();  // never destroyed, as the plans
  return *c;
}

// Why cuDNN's attention does not run (the backward: deterministically) on this device, or empty.
std::string device_refusal(Device dev, bool backward) {
  int major = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev.index) != cudaSuccess)
    return "the device's compute capability is unknown";
  if (major < 8) return "a GPU before Ampere (cuDNN's fused attention needs compute capability 8.0)";
  if (backward && major >= 10) return "Blackwell (a deterministic backward needs a pinned engine and knobs)";
  return "";
}

// The plan of this call's shape and direction, built on first use; null where cuDNN refuses it.
const Entry* plan_for(cudnnHandle_t h, Device dev, DType dt, const Geo& g, bool backward) {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  auto [it, fresh] = c.entries.try_emplace(key_of(dev, dt, g, backward));
  if (fresh) {
    std::string why = device_refusal(dev, backward);
    if (why.empty()) {
      const sdpa::Plan p = sdpa::build(h, g, dnn_type(dt), backward, max_workspace(dev));
      if (p.plan)
        it->second = Entry{p.plan, p.workspace};
      else
        why = p.why;
    }
    if (!why.empty())
      std::fprintf(stderr,
                   "zerotrain: cuDNN attention refuses the %s of %s B=%lld T=%lld H=%lld K=%lld D=%lld%s%s on %s: %s; "
                   "the own kernels run it\n",
                   backward ? "backward" : "forward", dtype_name(dt), (long long)g.B, (long long)g.T, (long long)g.H,
                   (long long)g.K, (long long)g.D, g.causal ? " causal" : "", g.mask ? " key-masked" : "",
                   dev.str().c_str(), why.c_str());
  }
  return it->second.plan ? &it->second : nullptr;
}

// Whether the forward of this shape ran through cuDNN (its plan exists).
bool forward_took(Device dev, DType dt, const Geo& g) {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  auto it = c.entries.find(key_of(dev, dt, g, false));
  return it != c.entries.end() && it->second.plan;
}

// cudnn-frontend #628: on Hopper before cuDNN 9.26, a backward whose T is 64 mod 128 reads K and
// V's zero tail unmasked where no causal mask covers it.
bool hopper_tail_bug(Device dev, const Geo& g) {
  if (g.causal || g.T % 128 != 64 || cudnnGetVersion() >= 92600) return false;
  int major = 0;
  return cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev.index) != cudaSuccess || major == 9;
}

// A cuDNN handle is one thread's at a time: its stream is set, then the plan enqueued, as one step.
std::mutex& handle_mutex() {
  static std::mutex m;
  return m;
}

bool aligned(std::initializer_list<const Tensor*> ts) {
  for (const Tensor* t : ts)
    if (reinterpret_cast<uintptr_t>(t->raw_data()) % 16 != 0) return false;
  return true;
}

// Stream-ordered scratch of at least `bytes` (none for 0): freed once the call is enqueued, its
// reuse ordered after the call by the stream.
Tensor scratch(int64_t bytes, Device dev) {
  return bytes > 0 ? Tensor::empty({(bytes + 7) / 8}, DType::i64, MemTag::workspace, dev) : Tensor();
}

// Q, K and V's first elements in a [B, T, W] buffer (qkv or dqkv).
std::array<void*, 3> qkv_views(const Tensor& t, const Geo& g) {
  char* base = static_cast<char*>(t.raw_data());
  const int64_t size = int64_t(dtype_size(t.dtype()));
  return {base + g.q_col(0) * size, base + g.k_col(0) * size, base + g.v_col(0) * size};
}

struct VariantPack {
  cudnnBackendDescriptor_t d = nullptr;
  VariantPack() { ZT_DNN_CHECK(cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &d)); }
  ~VariantPack() { cudnnBackendDestroyDescriptor(d); }
  VariantPack(const VariantPack&) = delete;
  VariantPack& operator=(const VariantPack&) = delete;
};

// A variant pack's (uid, pointer) pairs: the graph's tensors, the masks' by-value fills and
// lengths only where the graph has them.
struct Bindings {
  std::vector<int64_t> uids;
  std::vector<void*> ptrs;
  float neg_inf = -std::numeric_limits<float>::infinity();
  void bind(int64_t uid, const void* p) {
    uids.push_back(uid);
    ptrs.push_back(const_cast<void*>(p));
  }
  void bind_masks(const Geo& g, const SeqLengths& len) {
    if (g.causal) bind(sdpa::kNegInf, &neg_inf);
    if (!g.mask) return;
    bind(sdpa::kPadFill, &neg_inf);
    bind(sdpa::kSeqQ, len.q);
    bind(sdpa::kSeqKV, len.kv);
  }
};

// Enqueues the plan on the handle's stream with the bound tensors.
void execute(cudnnHandle_t h, const Entry& e, const Bindings& b, void* workspace) {
  VariantPack pack;
  const int64_t n = int64_t(b.uids.size());
  ZT_DNN_CHECK(
      cudnnBackendSetAttribute(pack.d, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, n, b.uids.data()));
  ZT_DNN_CHECK(
      cudnnBackendSetAttribute(pack.d, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, n, b.ptrs.data()));
  ZT_DNN_CHECK(cudnnBackendSetAttribute(pack.d, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace));
  ZT_DNN_CHECK(cudnnBackendFinalize(pack.d));
  ZT_DNN_CHECK(cudnnBackendExecute(h, e.plan, pack.d));
}

}  // namespace

const char* cudnn_refusal(const Geo& g, DType dt) {
  static const size_t version = cudnnGetVersion();
  if (!enabled()) return "ZT_CUDNN_ATTENTION=0";
  if (version < 91002) return "a cuDNN library older than 9.10.2";
  if (dt == DType::f32) return "f32 (cuDNN's fused attention is 16-bit)";
  if (dt != DType::bf16 && dt != DType::f16) return "a dtype other than bf16 and f16";
  if (g.D % 8 != 0 || g.D > 128) return "a head size that is not a multiple of 8 up to 128";
  if (g.T < 2) return "a sequence of one (cuDNN's backward does not take one query and one key)";
  if (g.K < 1 || g.H % g.K != 0) return "query heads that are not a multiple of the kv heads";
  if (version <= 91500 && g.T % 128 != 0)
    return "a sequence length that is not a multiple of 128 on cuDNN up to 9.15.0";
  return nullptr;
}

bool forward_cudnn_on(const Tensor& qkv, const Geo& g, const SeqLengths& len, Tensor& out, Tensor& lse, Device dev,
                      cudaStream_t stream) {
  const DType dt = qkv.dtype();
  if (cudnn_refusal(g, dt) || !aligned({&qkv, &out, &lse})) return false;
  const cudnnHandle_t h = handle_for(dev.index);
  const Entry* e = plan_for(h, dev, dt, g, false);
  if (!e) return false;
  const Tensor ws = scratch(e->workspace, dev);
  float scale = g.scale;
  const auto in = qkv_views(qkv, g);
  Bindings b;
  for (int i = 0; i < 3; ++i) b.bind(sdpa::kQ + i, in[size_t(i)]);
  b.bind(sdpa::kO, out.raw_data());
  b.bind(sdpa::kStats, lse.raw_data());
  b.bind(sdpa::kScale, &scale);
  b.bind_masks(g, len);
  std::lock_guard<std::mutex> lock(handle_mutex());
  ZT_DNN_CHECK(cudnnSetStream(h, stream));
  execute(h, *e, b, ws.defined() ? ws.raw_data() : nullptr);
  return true;
}

bool backward_cudnn_on(const Tensor& dout, const Tensor& qkv, const Tensor& out, const Tensor& lse, const Geo& g,
                       const SeqLengths& len, Tensor& dqkv, Device dev, cudaStream_t stream) {
  const DType dt = qkv.dtype();
  if (cudnn_refusal(g, dt) || !aligned({&dout, &qkv, &out, &lse, &dqkv}) || !forward_took(dev, dt, g) ||
      hopper_tail_bug(dev, g))
    return false;  // the own backward reads cuDNN's Stats as lse: the same values
  const cudnnHandle_t h = handle_for(dev.index);
  const Entry* e = plan_for(h, dev, dt, g, true);
  if (!e) return false;
  // Dot (f32 [B, H, T]) first, then cuDNN's own workspace from a 256-byte boundary.
  const int64_t dot_bytes = (g.B * g.H * g.T * int64_t(sizeof(float)) + 255) / 256 * 256;
  const Tensor ws = scratch(dot_bytes + e->workspace, dev);
  char* w = static_cast<char*>(ws.raw_data());
  float scale = g.scale, one = 1.f;
  const auto in = qkv_views(qkv, g), d = qkv_views(dqkv, g);
  Bindings b;
  for (int i = 0; i < 3; ++i) {
    b.bind(sdpa::kQ + i, in[size_t(i)]);
    b.bind(sdpa::kDQ + i, d[size_t(i)]);
  }
  b.bind(sdpa::kO, out.raw_data());
  b.bind(sdpa::kDO, dout.raw_data());
  b.bind(sdpa::kStats, lse.raw_data());
  b.bind(sdpa::kScale, &scale);
  b.bind(sdpa::kOne, &one);
  b.bind(sdpa::kDot, w);
  b.bind_masks(g, len);
  // Padded keys' rows may be left unwritten by cuDNN: their gradient is zero (Note [cudnn padding mask]).
  if (g.mask && cudaMemsetAsync(dqkv.raw_data(), 0, dqkv.nbytes(), stream) != cudaSuccess)
    ZT_THROW_AS(ErrorKind::internal, "[cuda] attention_backward: zeroing dqkv for cuDNN's padding mask failed");
  std::lock_guard<std::mutex> lock(handle_mutex());
  ZT_DNN_CHECK(cudnnSetStream(h, stream));
  execute(h, *e, b, e->workspace > 0 ? w + dot_bytes : nullptr);
  return true;
}

}  // namespace zt::ops::cuda::attn
