// Matrix products through oneDNN. Transposes and strided views become memory strides (no
// copies); primitives are cached by (shapes, strides, dtype, bias) so steady state creates none.
#include <map>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "common.h"
#include "zt/ops/ops.h"

namespace zt::ops {

namespace {

using detail::check_float;

// A logical (batch x rows x cols) view of a 2-D or 3-D tensor: elem(b, r, c) at b*sb + r*sr + c*sc.
struct Mat {
  Tensor t;
  int64_t b = 1, r = 0, c = 0, sb = 0, sr = 0, sc = 0;
};

Mat describe(const Tensor& t, bool trans) {
  Mat m;
  m.t = t;
  const bool three = t.dim() == 3;
  const auto& sh = t.shape();
  const auto& st = t.strides();
  size_t o = three ? 1 : 0;
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

dnnl::engine& engine() {
  static dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  return eng;
}
dnnl::stream& stream() {
  static dnnl::stream s(engine());
  return s;
}

dnnl::memory::data_type dnnl_type(DType dt) {
  return dt == DType::bf16 ? dnnl::memory::data_type::bf16 : dnnl::memory::data_type::f32;
}

dnnl::memory::desc md(const Mat& m, bool three, DType dt) {
  using dims = dnnl::memory::dims;
  if (three) return {dims{m.b, m.r, m.c}, dnnl_type(dt), dims{m.sb, m.sr, m.sc}};
  return {dims{m.r, m.c}, dnnl_type(dt), dims{m.sr, m.sc}};
}

struct Cache {
  std::mutex mu;
  std::map<std::vector<int64_t>, dnnl::matmul> prims;
  bool bf16_unsupported = false;
};
Cache& cache() {
  static Cache* c = new Cache();  // never destroyed: may be used during static teardown
  return *c;
}

// Returns the cached primitive, or nullopt if oneDNN has no implementation (bf16 without AVX-512).
std::optional<dnnl::matmul> primitive(const Mat& a, const Mat& b, bool three, bool bias, DType dt) {
  std::vector<int64_t> key{three, bias, int64_t(dt), a.b, a.r, a.c, b.c, a.sb, a.sr, a.sc, b.sb, b.sr, b.sc};
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  auto it = c.prims.find(key);
  if (it != c.prims.end()) return it->second;
  if (dt == DType::bf16 && c.bf16_unsupported) return std::nullopt;
  Mat out{Tensor(), a.b, a.r, b.c, a.r * b.c, b.c, 1};
  Mat bias_m{Tensor(), 1, 1, b.c, b.c, b.c, 1};
  try {
    auto d = dnnl::matmul::desc(md(a, three, dt), md(b, three, dt),
                                bias ? md(bias_m, three, dt) : dnnl::memory::desc(), md(out, three, dt));
    dnnl::matmul prim(dnnl::matmul::primitive_desc(d, engine()));
    c.prims.emplace(key, prim);
    return prim;
  } catch (const dnnl::error& e) {
    ZT_CHECK(dt == DType::bf16, "[matmul] oneDNN could not create an f32 matmul for ", a.r, "x", a.c, " @ ", b.r,
             "x", b.c, ": ", e.what());
    c.bf16_unsupported = true;
    return std::nullopt;
  }
}

// Fast dtype conversion for the bf16 fallback (core's converting copy is element-by-element).
Tensor convert(const Tensor& t_in, DType to) {
  Tensor t = t_in.contiguous();
  Tensor out = Tensor::empty(t.shape(), to);
  const int64_t n = t.numel();
  detail::dispatch_float(t.dtype(), "matmul", [&](auto in_tag) {
    using I = decltype(in_tag);
    detail::dispatch_float(to, "matmul", [&](auto out_tag) {
      using O = decltype(out_tag);
      const I* __restrict src = t.data<I>();
      O* __restrict dst = out.data<O>();
      parallel_for(n, kGrain, [&](int64_t s, int64_t e) {
        for (int64_t i = s; i < e; ++i) detail::st(dst, i, detail::ld(src, i));
      });
    });
  });
  return out;
}

// out[b] = op(a)[b] @ op(b)[b] (+ bias), written into a new contiguous tensor of out_shape.
Tensor product(const Tensor& at, bool ta, const Tensor& bt, bool tb, const Tensor* bias, const Shape& out_shape) {
  const DType dt = at.dtype();
  const bool three = at.dim() == 3;
  Tensor out = Tensor::empty(out_shape, dt);
  if (out.numel() == 0) return out;
  Mat a = make_plain(at, ta), b = make_plain(bt, tb);
  if (a.c == 0) {  // empty inner dimension: the product is zero (plus the bias)
    out.zero_();
    return bias ? add(out, *bias) : out;
  }
  auto prim = primitive(a, b, three, bias != nullptr, dt);
  if (!prim) {  // no bf16 kernel on this CPU: compute in f32 and round once, as oneDNN would
    Tensor bias32 = bias ? convert(*bias, DType::f32) : Tensor();
    Tensor r = product(convert(at, DType::f32), ta, convert(bt, DType::f32), tb, bias ? &bias32 : nullptr, out_shape);
    return convert(r, DType::bf16);
  }
  Tensor bias_c = bias ? bias->contiguous() : Tensor();
  Mat o{out, a.b, a.r, b.c, a.r * b.c, b.c, 1};
  Mat bm{bias_c, 1, 1, b.c, b.c, b.c, 1};
  auto& eng = engine();
  dnnl::memory ma(md(a, three, dt), eng, a.t.raw_data());
  dnnl::memory mb(md(b, three, dt), eng, b.t.raw_data());
  dnnl::memory mo(md(o, three, dt), eng, out.raw_data());
  std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mo}};
  if (bias) args.emplace(DNNL_ARG_BIAS, dnnl::memory(md(bm, three, dt), eng, bias_c.raw_data()));
  prim->execute(stream(), args);
  stream().wait();
  return out;
}

}  // namespace

size_t matmul_cache_size() {
  std::lock_guard<std::mutex> lock(cache().mu);
  return cache().prims.size();
}

Tensor matmul(const Tensor& a, const Tensor& b, bool trans_a, bool trans_b) {
  check_float(a, "matmul");
  check_float(b, "matmul");
  detail::check_same_dtype(a, b, "matmul");
  ZT_CHECK((a.dim() == 2 || a.dim() == 3) && a.dim() == b.dim(), "[matmul] needs two 2-D or two 3-D tensors, got ",
           shape_str(a.shape()), " and ", shape_str(b.shape()));
  const Mat ma = describe(a, trans_a), mb = describe(b, trans_b);
  ZT_CHECK(ma.c == mb.r, "[matmul] inner dimensions ", ma.c, " and ", mb.r, " differ (shapes ", shape_str(a.shape()),
           trans_a ? "^T" : "", " and ", shape_str(b.shape()), trans_b ? "^T" : "", ")");
  ZT_CHECK(ma.b == mb.b, "[matmul] batch sizes ", ma.b, " and ", mb.b, " differ");
  Shape out = a.dim() == 3 ? Shape{ma.b, ma.r, mb.c} : Shape{ma.r, mb.c};
  return product(a, trans_a, b, trans_b, nullptr, out);
}

namespace {
// x [..., in] as a 2-D [rows, in] matrix (a view when possible).
Tensor flatten_rows(const Tensor& x) {
  if (x.dim() == 2) return x;
  return x.reshape({-1, x.size(-1)});
}
Shape with_last(const Shape& s, int64_t last) {
  Shape r = s;
  r.back() = last;
  return r;
}
}  // namespace

Tensor linear(const Tensor& x, const Tensor& w, const Tensor* b) {
  check_float(x, "linear");
  check_float(w, "linear");
  detail::check_same_dtype(x, w, "linear");
  ZT_CHECK(x.dim() >= 1 && w.dim() == 2, "[linear] needs x [..., in] and w [out, in], got ", shape_str(x.shape()),
           " and ", shape_str(w.shape()));
  ZT_CHECK(x.size(-1) == w.size(1), "[linear] x has ", x.size(-1), " input features but w ",
           shape_str(w.shape()), " expects ", w.size(1));
  if (b) {
    check_float(*b, "linear");
    detail::check_same_dtype(x, *b, "linear");
    ZT_CHECK(b->dim() == 1 && b->size(0) == w.size(0), "[linear] bias shape ", shape_str(b->shape()),
             " does not match ", w.size(0), " outputs");
  }
  Tensor x2 = x.dim() == 1 ? x.reshape({1, x.size(0)}) : flatten_rows(x);
  Tensor y = product(x2, false, w, true, b, {x2.size(0), w.size(0)});
  return y.view(with_last(x.shape(), w.size(0)));
}

LinearGrads linear_backward(const Tensor& dy, const Tensor& x, const Tensor& w, bool need_dx, bool has_bias) {
  check_float(dy, "linear_backward");
  detail::check_same_dtype(dy, w, "linear_backward");
  ZT_CHECK(dy.dim() >= 1 && dy.size(-1) == w.size(0), "[linear_backward] dy ", shape_str(dy.shape()),
           " does not match w ", shape_str(w.shape()));
  Tensor dy2 = dy.dim() == 1 ? dy.reshape({1, dy.size(0)}) : flatten_rows(dy);
  Tensor x2 = x.dim() == 1 ? x.reshape({1, x.size(0)}) : flatten_rows(x);
  ZT_CHECK(x2.size(0) == dy2.size(0), "[linear_backward] x ", shape_str(x.shape()), " and dy ",
           shape_str(dy.shape()), " have different row counts");
  LinearGrads g;
  if (need_dx) g.dx = product(dy2, false, w, false, nullptr, {dy2.size(0), w.size(1)}).view(x.shape());
  g.dw = product(dy2, true, x2, false, nullptr, w.shape());
  if (has_bias) g.db = sum(dy2, 0, false);
  return g;
}

}  // namespace zt::ops
