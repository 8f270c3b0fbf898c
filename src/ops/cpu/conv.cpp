// CPU convolutions through oneDNN: forward, backward data and backward weights, each a primitive
// cached by (direction, geometry, dtype, bias), so steady state creates none. Layouts per
// Note [conv layouts]; 16-bit without a oneDNN kernel per Note [low-precision fallback] (matmul.cpp).
#include <atomic>
#include <map>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

#include "common.h"
#include "conv_kernels.h"
#include "dnnl_util.h"
#include "kernels.h"

namespace zt::ops::cpu {
namespace {

using dnnl::memory;
using Tag = memory::format_tag;
using ConvFwd = dnnl::convolution_forward;
using ConvBwdData = dnnl::convolution_backward_data;
using ConvBwdWeights = dnnl::convolution_backward_weights;

// Note [conv layouts]: our tensors are plain NCHW (weights OIHW). Primitives are created with
// their layouts left to oneDNN ("any"), so it can pick the blocked ones (nChw16c, ...) its JIT
// kernels need; an argument whose chosen layout differs from ours is reordered through a
// workspace buffer around the call (inputs before, outputs after). The reorders are cached with
// the primitive; their cost is a copy, small beside the convolution's arithmetic.

enum class Dir : int64_t { forward, backward_data, backward_weights };

// One argument of a primitive: our layout, the primitive's, and the reorder between them when
// they differ (ours -> its for inputs, its -> ours for outputs).
struct Arg {
  int id;
  bool output;
  memory::desc ours, want;
  std::optional<dnnl::reorder> reorder;
};

struct Entry {
  dnnl::primitive prim;
  std::vector<Arg> args;
};

struct Cache {
  std::mutex mu;
  std::map<std::vector<int64_t>, Entry> entries;  // nodes never move or go: Entry* stays valid
  bool unsupported[2] = {false, false};           // bf16, f16: oneDNN created no primitive once
};
Cache& cache() {
  static Cache* c = new Cache();  // never destroyed: may be used during static teardown
  return *c;
}
bool& unsupported(Cache& c, DType dt) { return c.unsupported[dt == DType::f16 ? 1 : 0]; }
std::atomic<bool> g_force_fallback{false};
std::atomic<int64_t> g_fallbacks{0};

// Our layouts of x, w, b and y.
struct Plain {
  memory::desc x, w, b, y;
};
Plain plain(const ConvGeometry& g, DType dt) {
  const auto t = dnnl_type(dt);
  return {{{g.n, g.cin, g.h, g.w}, t, Tag::nchw},
          {{g.cout, g.cin, g.kh, g.kw}, t, Tag::oihw},
          {{g.cout}, t, Tag::a},
          {{g.n, g.cout, g.ho, g.wo}, t, Tag::nchw}};
}
memory::desc any(const memory::desc& m) { return {m.dims(), m.data_type(), Tag::any}; }

Entry make_entry(Dir dir, const ConvGeometry& g, DType dt, bool bias) {
  auto& eng = dnnl_engine();
  const memory::dims strides{g.stride, g.stride}, pad{g.pad, g.pad};
  const auto direct = dnnl::algorithm::convolution_direct;
  const Plain m = plain(g, dt);
  // The forward primitive descriptor is also the backward ones' hint.
  const ConvFwd::desc fd =
      bias ? ConvFwd::desc(dnnl::prop_kind::forward_training, direct, any(m.x), any(m.w), m.b, any(m.y), strides, pad,
                           pad)
           : ConvFwd::desc(dnnl::prop_kind::forward_training, direct, any(m.x), any(m.w), any(m.y), strides, pad, pad);
  const ConvFwd::primitive_desc fpd(fd, eng);
  Entry e;
  auto arg = [&](int id, bool output, const memory::desc& ours, const memory::desc& want) {
    Arg a{id, output, ours, want, std::nullopt};
    if (ours != want)
      a.reorder = output ? dnnl::reorder(dnnl::reorder::primitive_desc(eng, want, eng, ours))
                         : dnnl::reorder(dnnl::reorder::primitive_desc(eng, ours, eng, want));
    e.args.push_back(std::move(a));
  };
  switch (dir) {
    case Dir::forward:
      e.prim = ConvFwd(fpd);
      arg(DNNL_ARG_SRC, false, m.x, fpd.src_desc());
      arg(DNNL_ARG_WEIGHTS, false, m.w, fpd.weights_desc());
      if (bias) arg(DNNL_ARG_BIAS, false, m.b, fpd.bias_desc());
      arg(DNNL_ARG_DST, true, m.y, fpd.dst_desc());
      break;
    case Dir::backward_data: {
      const ConvBwdData::primitive_desc pd(ConvBwdData::desc(direct, any(m.x), any(m.w), any(m.y), strides, pad, pad),
                                           eng, fpd);
      e.prim = ConvBwdData(pd);
      arg(DNNL_ARG_DIFF_DST, false, m.y, pd.diff_dst_desc());
      arg(DNNL_ARG_WEIGHTS, false, m.w, pd.weights_desc());
      arg(DNNL_ARG_DIFF_SRC, true, m.x, pd.diff_src_desc());
      break;
    }
    case Dir::backward_weights: {
      const ConvBwdWeights::desc d =
          bias ? ConvBwdWeights::desc(direct, any(m.x), any(m.w), m.b, any(m.y), strides, pad, pad)
               : ConvBwdWeights::desc(direct, any(m.x), any(m.w), any(m.y), strides, pad, pad);
      const ConvBwdWeights::primitive_desc pd(d, eng, fpd);
      e.prim = ConvBwdWeights(pd);
      arg(DNNL_ARG_SRC, false, m.x, pd.src_desc());
      arg(DNNL_ARG_DIFF_DST, false, m.y, pd.diff_dst_desc());
      arg(DNNL_ARG_DIFF_WEIGHTS, true, m.w, pd.diff_weights_desc());
      if (bias) arg(DNNL_ARG_DIFF_BIAS, true, m.b, pd.diff_bias_desc());
      break;
    }
  }
  return e;
}

// The cached entry, or nullptr where a 16-bit dtype has no oneDNN convolution.
Entry* entry(Dir dir, const ConvGeometry& g, DType dt, bool bias) {
  // oneDNN sizes a primitive's work split and scratchpad for the threads at its creation.
  const std::vector<int64_t> key{int64_t(dir), int64_t(dt), bias, g.n,      g.cin, g.h,          g.w,
                                 g.cout,       g.kh,        g.kw, g.stride, g.pad, num_threads(), dnnl_thread_slot()};
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  if (auto it = c.entries.find(key); it != c.entries.end()) return &it->second;
  if (dt != DType::f32 && unsupported(c, dt)) return nullptr;
  try {
    return &c.entries.emplace(key, make_entry(dir, g, dt, bias)).first->second;
  } catch (const dnnl::error& e) {
    ZT_CHECK_AS(ErrorKind::internal, dt != DType::f32, "[conv2d] oneDNN could not create an f32 convolution for x [",
                g.n, ", ", g.cin, ", ", g.h, ", ", g.w, "], w [", g.cout, ", ", g.cin, ", ", g.kh, ", ", g.kw,
                "], stride ", g.stride, ", padding ", g.pad, ": ", e.what());
    unsupported(c, dt) = true;
    return nullptr;
  }
}

// Runs the entry on our buffers (one pointer per argument, in the entry's order).
void execute(Entry& e, const std::vector<void*>& ptrs) {
  auto& eng = dnnl_engine();
  auto& s = dnnl_stream();
  std::vector<Tensor> buffers;  // the reordered copies, alive until the stream is done
  std::vector<std::pair<size_t, memory>> outputs;
  std::unordered_map<int, memory> args;
  std::vector<memory> user;
  for (size_t i = 0; i < e.args.size(); ++i) {
    Arg& a = e.args[i];
    user.emplace_back(a.ours, eng, ptrs[i]);
    if (!a.reorder) {
      args.emplace(a.id, user.back());
      continue;
    }
    buffers.push_back(Tensor::empty({int64_t((a.want.get_size() + 3) / 4)}, DType::f32, MemTag::workspace));
    memory theirs(a.want, eng, buffers.back().raw_data());
    if (a.output)
      outputs.emplace_back(i, theirs);
    else
      a.reorder->execute(s, user.back(), theirs);
    args.emplace(a.id, theirs);
  }
  e.prim.execute(s, args);
  for (auto& [i, theirs] : outputs) e.args[i].reorder->execute(s, theirs, user[i]);
  s.wait();
}

// What the kernels run: the entry, or nullptr for the fallback (also when a test forces it).
Entry* pick(Dir dir, const ConvGeometry& g, DType dt, bool bias) {
  return dt != DType::f32 && g_force_fallback.load() ? nullptr : entry(dir, g, dt, bias);
}

Tensor widen(const Tensor& t) {
  Tensor out = Tensor::empty(t.shape(), DType::f32);
  cast(t, out);
  return out;
}

}  // namespace

void conv2d(const Tensor& x, const Tensor& w, const Tensor* b, const ConvGeometry& g, Tensor& y) {
  if (Entry* e = pick(Dir::forward, g, x.dtype(), b != nullptr)) {
    std::vector<void*> p{x.raw_data(), w.raw_data()};
    if (b) p.push_back(b->raw_data());
    p.push_back(y.raw_data());
    return execute(*e, p);
  }
  g_fallbacks.fetch_add(1);
  const Tensor b32 = b ? widen(*b) : Tensor();
  Tensor y32 = Tensor::empty(y.shape(), DType::f32);
  conv2d(widen(x), widen(w), b ? &b32 : nullptr, g, y32);
  cast(y32, y);
}

void conv2d_backward_data(const Tensor& dy, const Tensor& w, const ConvGeometry& g, Tensor& dx) {
  if (Entry* e = pick(Dir::backward_data, g, dy.dtype(), false))
    return execute(*e, {dy.raw_data(), w.raw_data(), dx.raw_data()});
  g_fallbacks.fetch_add(1);
  Tensor dx32 = Tensor::empty(dx.shape(), DType::f32);
  conv2d_backward_data(widen(dy), widen(w), g, dx32);
  cast(dx32, dx);
}

void conv2d_backward_weights(const Tensor& dy, const Tensor& x, const ConvGeometry& g, Tensor& dw, Tensor* db) {
  if (Entry* e = pick(Dir::backward_weights, g, dy.dtype(), db != nullptr)) {
    std::vector<void*> p{x.raw_data(), dy.raw_data(), dw.raw_data()};
    if (db) p.push_back(db->raw_data());
    return execute(*e, p);
  }
  g_fallbacks.fetch_add(1);
  Tensor dw32 = Tensor::empty(dw.shape(), DType::f32);
  Tensor db32 = db ? Tensor::empty(db->shape(), DType::f32) : Tensor();
  conv2d_backward_weights(widen(dy), widen(x), g, dw32, db ? &db32 : nullptr);
  cast(dw32, dw);
  if (db) cast(db32, *db);
}

bool conv_native(DType dt) {
  if (dt == DType::f32) return true;
  const ConvGeometry g{1, 16, 8, 8, 16, 3, 3, 1, 1, 8, 8};
  return entry(Dir::forward, g, dt, false) != nullptr;
}

void set_conv_lowp_fallback(bool force) { g_force_fallback.store(force); }
bool conv_lowp_fallback() { return g_force_fallback.load(); }
int64_t conv_fallback_count() { return g_fallbacks.load(); }

size_t conv_cache_size() {
  std::lock_guard<std::mutex> lock(cache().mu);
  return cache().entries.size();
}

}  // namespace zt::ops::cpu
