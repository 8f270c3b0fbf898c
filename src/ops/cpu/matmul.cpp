// CPU matrix products through oneDNN. Transposes and strided views become memory strides (no
// copies); primitives are cached by (shapes, strides, dtype, bias) so steady state creates none.
// 16-bit products use oneDNN's bf16/f16 kernels (fp32 accumulation) where the CPU has them,
// else Note [low-precision fallback]; a run may choose that path where it is faster
// (Note [16-bit products], ops.h).
#include <atomic>
#include <map>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "../mat_view.h"
#include "common.h"
#include "dnnl_util.h"
#include "kernels.h"
#include "zt/core/parallel.h"

namespace zt::ops::cpu {
namespace {

using detail::describe;
using detail::Mat;

// oneDNN's fast paths want one unit stride per matrix and non-overlapping batches.
bool plain(const Mat& m) {
  const bool rows = m.sc == 1 && m.sr >= m.c;
  const bool cols = m.sr == 1 && m.sc >= m.r;
  const int64_t span = (m.r - 1) * m.sr + (m.c - 1) * m.sc + 1;
  return (rows || cols) && (m.b == 1 || m.sb >= span);
}

Mat make_plain(const Tensor& t, bool trans) {
  Mat m = describe(t, trans);
  return plain(m) ? m : describe(t.contiguous(), trans);
}

dnnl::memory::desc md(const Mat& m, bool three, DType dt) {
  using dims = dnnl::memory::dims;
  if (three) return {dims{m.b, m.r, m.c}, dnnl_type(dt), dims{m.sb, m.sr, m.sc}};
  return {dims{m.r, m.c}, dnnl_type(dt), dims{m.sr, m.sc}};
}

struct Cache {
  std::mutex mu;
  std::map<std::vector<int64_t>, dnnl::matmul> prims;
  bool unsupported[2] = {false, false};  // bf16, f16: oneDNN created no primitive once
};
bool& unsupported(Cache& c, DType dt) { return c.unsupported[dt == DType::f16 ? 1 : 0]; }

std::atomic<bool> g_force_fallback{false};
std::atomic<int64_t> g_fallbacks{0};
Cache& cache() {
  static Cache* c = new Cache();  // never destroyed: may be used during static teardown
  return *c;
}

// Returns the cached primitive, or nullopt if oneDNN has no implementation for a 16-bit dtype
// (bf16 needs AVX-512; oneDNN 2.6 has no f16 matmul on CPU).
std::optional<dnnl::matmul> primitive(const Mat& a, const Mat& b, bool three, bool bias, DType dt) {
  std::vector<int64_t> key{three, bias, int64_t(dt), a.b,  a.r,  a.c,  b.c,
                           a.sb,  a.sr, a.sc,        b.sb, b.sr, b.sc, dnnl_thread_slot(),
                           num_threads()};  // a primitive splits its work for the team it was made for
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  auto it = c.prims.find(key);
  if (it != c.prims.end()) return it->second;
  if (dt != DType::f32 && unsupported(c, dt)) return std::nullopt;
  Mat out{Tensor(), a.b, a.r, b.c, a.r * b.c, b.c, 1};
  Mat bias_m{Tensor(), 1, 1, b.c, b.c, b.c, 1};
  try {
    auto d = dnnl::matmul::desc(md(a, three, dt), md(b, three, dt), bias ? md(bias_m, three, dt) : dnnl::memory::desc(),
                                md(out, three, dt));
    dnnl::matmul prim(dnnl::matmul::primitive_desc(d, dnnl_engine()));
    c.prims.emplace(key, prim);
    return prim;
  } catch (const dnnl::error& e) {
    ZT_CHECK_AS(ErrorKind::internal, dt != DType::f32, "[matmul] oneDNN could not create an f32 matmul for ", a.r, "x",
                a.c, " @ ", b.r, "x", b.c, ": ", e.what());
    unsupported(c, dt) = true;
    return std::nullopt;
  }
}

Tensor widen(const Tensor& t) {
  Tensor c = t.contiguous();
  Tensor out = Tensor::empty(c.shape(), DType::f32);
  cast(c, out);
  return out;
}

// Note [low-precision fallback]: without a 16-bit kernel, inputs are widened to f32, multiplied
// by the f32 kernel and rounded once: what oneDNN's kernel computes, up to summation order.
void product(const Tensor& at, bool ta, const Tensor& bt, bool tb, const Tensor* bias, Tensor& out) {
  const DType dt = at.dtype();
  const bool three = at.dim() == 3;
  Mat a = make_plain(at, ta), b = make_plain(bt, tb);
  if (a.c == 0) {  // empty inner dimension: the product is zero (plus the bias)
    out.zero_();
    if (bias) {
      Tensor rows = out.view({-1, out.size(-1)});
      for (int64_t r = 0; r < rows.size(0); ++r) rows.select(0, r).copy_(*bias);
    }
    return;
  }
  std::optional<dnnl::matmul> prim;
  if (dt == DType::f32 || !g_force_fallback.load()) prim = primitive(a, b, three, bias != nullptr, dt);
  if (!prim) {
    g_fallbacks.fetch_add(1);
    Tensor bias32 = bias ? widen(*bias) : Tensor();
    Tensor r = Tensor::empty(out.shape(), DType::f32);
    product(widen(at), ta, widen(bt), tb, bias ? &bias32 : nullptr, r);
    cast(r, out);
    return;
  }
  Tensor bias_c = bias ? bias->contiguous() : Tensor();
  Mat o{out, a.b, a.r, b.c, a.r * b.c, b.c, 1};
  Mat bm{bias_c, 1, 1, b.c, b.c, b.c, 1};
  auto& eng = dnnl_engine();
  dnnl::memory ma(md(a, three, dt), eng, a.t.raw_data());
  dnnl::memory mb(md(b, three, dt), eng, b.t.raw_data());
  dnnl::memory mo(md(o, three, dt), eng, out.raw_data());
  std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mo}};
  if (bias) args.emplace(DNNL_ARG_BIAS, dnnl::memory(md(bm, three, dt), eng, bias_c.raw_data()));
  prim->execute(dnnl_stream(), args);
  dnnl_stream().wait();
}

}  // namespace

void matmul(const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, const Tensor* bias, Tensor& out) {
  product(a, trans_a, b, trans_b, bias, out);
}

bool matmul_native(DType dt) {
  if (dt == DType::f32) return true;
  Tensor x = Tensor::zeros({2, 2}, dt);
  const Mat m = describe(x, false);
  return primitive(m, m, false, false, dt).has_value();
}

void set_matmul_lowp_fallback(bool force) { g_force_fallback.store(force); }
bool matmul_lowp_fallback() { return g_force_fallback.load(); }
bool cpu_has_amx() {  // oneDNN's ISA values are bit sets, each containing the ones below it
  const int amx = int(dnnl::cpu_isa::avx512_core_amx);
  return (int(dnnl::get_effective_cpu_isa()) & amx) == amx;
}
int64_t matmul_fallback_count() { return g_fallbacks.load(); }

size_t matmul_cache_size() {
  std::lock_guard<std::mutex> lock(cache().mu);
  return cache().prims.size();
}

}  // namespace zt::ops::cpu
