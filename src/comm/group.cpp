// Backend-independent parts of the comm layer: names, checks, sequence numbers, byte counts,
// backend selection, and the element-wise helpers the backends share.
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <thread>
#include <utility>

#include <xxhash.h>

#include "comm_detail.h"
#include "zt/comm/backends.h"
#include "zt/core/strings.h"

namespace zt::comm {

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
      return "sum";
    case ReduceOp::avg:
      return "avg";
    case ReduceOp::max:
      return "max";
  }
  return "unknown";
}

const char* coll_name(Coll c) {
  switch (c) {
    case Coll::all_reduce:
      return "all_reduce";
    case Coll::reduce_scatter:
      return "reduce_scatter";
    case Coll::all_gather:
      return "all_gather";
    case Coll::broadcast:
      return "broadcast";
    case Coll::barrier:
      return "barrier";
    case Coll::all_to_all:
      return "all_to_all";
    case Coll::send:
      return "send";
    case Coll::recv:
      return "recv";
  }
  return "unknown";
}

uint64_t CommStats::total_bytes() const {
  uint64_t sum = 0;
  for (uint64_t b : bytes) sum += b;
  return sum;
}

void Group::set_timeout(double seconds) {
  ZT_CHECK(seconds > 0, "[comm] timeout must be positive, got ", seconds, " s");
  timeout_s_ = seconds;
}

namespace {
std::array<std::atomic<int64_t>, kNumColl> g_delay_us{};  // inject_delay_for_testing
}  // namespace

void inject_delay_for_testing(Coll c, double seconds) { g_delay_us[size_t(c)].store(int64_t(seconds * 1e6)); }

Group::Call Group::next_call(Coll coll, const CollOptions& opts, DType dtype, int64_t numel, int root) {
  ZT_CHECK(opts.timeout_s >= 0, "[comm] ", coll_name(coll), ": timeout_s must be >= 0 (0 = the group's ", timeout_s_,
           " s), got ", opts.timeout_s);
  if (const int64_t us = g_delay_us[size_t(coll)].load(std::memory_order_relaxed); us > 0)
    std::this_thread::sleep_for(std::chrono::microseconds(us));
  Call c{coll, opts.op, ++seq_, opts.timeout_s > 0 ? opts.timeout_s : timeout_s_, opts.label, {}};
  CallSignature& s = c.sig;
  s.seq = c.seq;
  s.coll = uint32_t(coll);
  s.dtype = uint32_t(dtype);
  s.numel = numel;
  s.root = root;
  s.op = coll == Coll::all_reduce || coll == Coll::reduce_scatter ? uint32_t(opts.op) : 0;
  s.label_hash = XXH64(opts.label.data(), opts.label.size(), 0);
  s.world_rank = detail::world_rank();
  s.label_len = uint32_t(std::min(opts.label.size(), sizeof s.label));
  std::memcpy(s.label, opts.label.data(), s.label_len);
  return c;
}

bool CallSignature::same_call(const CallSignature& o) const {
  return seq == o.seq && coll == o.coll && dtype == o.dtype && numel == o.numel && root == o.root && op == o.op &&
         label_hash == o.label_hash;
}

namespace {
// "all_gather #812 'step 3, unit 7' (bf16, 1.2M elements)"
std::string describe(const CallSignature& s) {
  std::string label(s.label, std::min<size_t>(s.label_len, sizeof s.label));
  if (s.label_len == sizeof s.label) label += "...";
  char count[32];
  if (s.numel >= 1000000)
    std::snprintf(count, sizeof count, "%.1fM", double(s.numel) / 1e6);
  else if (s.numel >= 10000)
    std::snprintf(count, sizeof count, "%.1fk", double(s.numel) / 1e3);
  else
    std::snprintf(count, sizeof count, "%lld", static_cast<long long>(s.numel));
  const Coll c = s.coll < kNumColl ? Coll(s.coll) : Coll::barrier;
  std::string what = zt::detail::concat(coll_name(c), " #", s.seq, label.empty() ? "" : " '" + label + "'");
  if (c == Coll::barrier) return what;
  what += zt::detail::concat(" (", s.dtype <= uint32_t(DType::i64) ? dtype_name(DType(s.dtype)) : "?", ", ", count,
                             s.numel == 1 ? " element" : " elements");
  if (c == Coll::broadcast) what += zt::detail::concat(", root ", s.root);
  if (c == Coll::all_reduce || c == Coll::reduce_scatter)
    what += zt::detail::concat(", ", reduce_op_name(ReduceOp(s.op)));
  return what + ")";
}
}  // namespace

std::string signature_mismatch(const CallSignature* sigs, int n) {
  for (int q = 1; q < n; ++q)
    if (!sigs[q].same_call(sigs[0]))
      return zt::detail::concat("[comm] ranks out of step: rank ", sigs[q].world_rank, " is at ", describe(sigs[q]),
                                " while rank ", sigs[0].world_rank, " is at ", describe(sigs[0]),
                                " (every rank must launch the same collectives in the same order)");
  return "";
}

void Group::count(Coll c, uint64_t bytes) {
  stats_.bytes[size_t(c)] += bytes;
  stats_.calls[size_t(c)] += 1;
}

// Each collective: shared checks (so every backend rejects the same inputs alike, before any
// sequence number is taken), then the backend, then the bytes at issue time (Note [comm bytes]).
WorkPtr Group::all_reduce_async(Tensor& buf, const CollOptions& opts) {
  detail::check_buffer(Coll::all_reduce, buf, "buffer", device());
  detail::check_op(Coll::all_reduce, opts.op, buf.dtype());
  WorkPtr w = do_all_reduce(buf, next_call(Coll::all_reduce, opts, buf.dtype(), buf.numel()));
  count(Coll::all_reduce, 2 * buf.nbytes());
  return w;
}

WorkPtr Group::reduce_scatter_async(const Tensor& in, Tensor& out, const CollOptions& opts) {
  detail::check_reduce_scatter(size(), in, out, device());
  detail::check_op(Coll::reduce_scatter, opts.op, in.dtype());
  WorkPtr w = do_reduce_scatter(in, out, next_call(Coll::reduce_scatter, opts, in.dtype(), in.numel()));
  count(Coll::reduce_scatter, in.nbytes());
  return w;
}

WorkPtr Group::all_gather_async(const Tensor& in, Tensor& out, const CollOptions& opts) {
  detail::check_all_gather(size(), in, out, device());
  WorkPtr w = do_all_gather(in, out, next_call(Coll::all_gather, opts, in.dtype(), in.numel()));
  count(Coll::all_gather, out.nbytes());
  return w;
}

WorkPtr Group::broadcast_async(Tensor& buf, int root, const CollOptions& opts) {
  detail::check_buffer(Coll::broadcast, buf, "buffer", device());
  detail::check_root(size(), root);
  WorkPtr w = do_broadcast(buf, root, next_call(Coll::broadcast, opts, buf.dtype(), buf.numel(), root));
  count(Coll::broadcast, buf.nbytes());
  return w;
}

WorkPtr Group::barrier_async(const CollOptions& opts) {
  WorkPtr w = do_barrier(next_call(Coll::barrier, opts));
  count(Coll::barrier, 0);
  return w;
}

WorkPtr Group::all_to_all_async(const Tensor& in, Tensor& out, const CollOptions& opts) {
  detail::check_all_to_all(size(), in, out, device());
  WorkPtr w = do_all_to_all(in, out, next_call(Coll::all_to_all, opts, in.dtype(), in.numel()));
  count(Coll::all_to_all, in.nbytes());
  return w;
}

WorkPtr Group::do_all_to_all(const Tensor& in, Tensor& out, const Call& c) {
  const int64_t n = in.numel(), k = n / size();
  Tensor all = Tensor::empty({int64_t(size()) * n}, in.dtype(), MemTag::comm);
  Call gather = c;  // the backend runs an all_gather (shm dispatches on it)
  gather.coll = Coll::all_gather;
  WorkPtr w = do_all_gather(in, all, gather);
  const int me = rank();
  return std::make_shared<detail::ThenWork>(std::move(w), [all, out, n, k, me, p = size()]() mutable {
    for (int r = 0; r < p; ++r) {
      const Tensor piece = all.slice(0, r * n + me * k, r * n + (me + 1) * k);
      Tensor dst = out.view({out.numel()}).slice(0, r * k, (r + 1) * k);
      detail::copy_bytes(piece, dst);
    }
  });
}

// Note [point-to-point]: numbered apart from the collectives (a send is one rank's call, so it
// would shift the numbers that name a collective alike on every rank).
Group::Call Group::next_p2p_call(Coll coll, const CollOptions& opts) {
  ZT_CHECK(opts.timeout_s >= 0, "[comm] ", coll_name(coll), ": timeout_s must be >= 0 (0 = the group's ", timeout_s_,
           " s), got ", opts.timeout_s);
  return Call{coll, opts.op, ++p2p_seq_, opts.timeout_s > 0 ? opts.timeout_s : timeout_s_, opts.label, {}};
}

WorkPtr Group::send_async(const Tensor& buf, int peer, const CollOptions& opts) {
  detail::check_buffer(Coll::send, buf, "buffer", device());
  detail::check_peer(Coll::send, size(), rank(), peer);
  WorkPtr w = do_send(buf, peer, next_p2p_call(Coll::send, opts));
  count(Coll::send, buf.nbytes());
  return w;
}

WorkPtr Group::recv_async(Tensor& buf, int peer, const CollOptions& opts) {
  detail::check_buffer(Coll::recv, buf, "buffer", device());
  detail::check_peer(Coll::recv, size(), rank(), peer);
  WorkPtr w = do_recv(buf, peer, next_p2p_call(Coll::recv, opts));
  count(Coll::recv, buf.nbytes());
  return w;
}

WorkPtr Group::do_send(const Tensor&, int, const Call&) {
  ZT_THROW_AS(ErrorKind::comm, "[comm] send is not available with backend ", backend(),
              " (point-to-point messages need run.comm_backend mpi)");
}

WorkPtr Group::do_recv(Tensor&, int, const Call&) {
  ZT_THROW_AS(ErrorKind::comm, "[comm] recv is not available with backend ", backend(),
              " (point-to-point messages need run.comm_backend mpi)");
}

double Group::all_reduce_scalar(double v, const CollOptions& opts) {
  Tensor t = Tensor::empty({1}, DType::f32, MemTag::comm);
  *t.data<float>() = float(v);
  Tensor on_device = t.to(device());  // t itself on host groups
  all_reduce(on_device, opts);
  return double(*on_device.to(Device::cpu()).data<float>());
}

double Group::all_reduce_double(double v, const CollOptions& opts) {
  Tensor mine = Tensor::empty({1}, DType::i64, MemTag::comm);
  std::memcpy(mine.raw_data(), &v, sizeof v);
  Tensor on_device = mine.to(device()), all = Tensor::empty({size()}, DType::i64, MemTag::comm, device());
  all_gather(on_device, all, opts);
  const Tensor host = all.to(Device::cpu());
  double sum = 0;
  for (int r = 0; r < size(); ++r) {
    double x = 0;
    std::memcpy(&x, static_cast<const char*>(host.raw_data()) + sizeof x * size_t(r), sizeof x);
    sum += x;
  }
  return sum;
}

void agree_on_error(Group& g, const std::string& error, const std::string& label, ErrorKind kind) {
  const int n = g.size();
  CollOptions o(ReduceOp::max, label);
  const int first = n - int(g.all_reduce_scalar(error.empty() ? 0.0 : double(n - g.rank()), o));
  if (first == n) return;
  constexpr size_t kMaxText = 4096;  // one fixed-size broadcast: length, then the bytes
  Tensor text = Tensor::empty({int64_t(kMaxText / 4 + 1)}, DType::i32, MemTag::comm);
  int32_t* t = text.data<int32_t>();
  std::memset(t, 0, text.nbytes());
  if (g.rank() == first) {
    const std::string mine = n > 1 ? error + " (rank " + std::to_string(first) + ")" : error;
    t[0] = int32_t(std::min(mine.size(), kMaxText));
    std::memcpy(t + 1, mine.data(), size_t(t[0]));
  }
  if (n > 1) {
    Tensor on_device = text.to(g.device());  // text itself on host groups
    g.broadcast(on_device, first, CollOptions(label + ", the error"));
    text = on_device.to(Device::cpu());
    t = text.data<int32_t>();
  }
  throw AgreedError(std::string(reinterpret_cast<const char*>(t + 1), size_t(std::clamp<int32_t>(t[0], 0, kMaxText))),
                    kind);
}

bool launched_by_mpirun() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMIX_RANK") != nullptr;
}

GroupPtr make_group(const std::string& backend) {
  if (backend == "local") return detail::make_local_group();
  if (backend == "mpi") return detail::make_mpi_group();
  if (backend == "shm") return detail::make_shm_group();
  if (backend == "nccl") return detail::make_launched_nccl_group();
  if (backend == "auto") return launched_by_mpirun() ? detail::make_launched_group() : detail::make_local_group();
  ZT_THROW("[comm] unknown backend '", backend, "'; allowed: ", join(named_backends()), ", auto");
}

namespace detail {

void check_buffer(Coll c, const Tensor& t, const char* what, Device device) {
  ZT_CHECK(t.defined() && t.has_storage(), "[comm] ", coll_name(c), ": ", what,
           " tensor is undefined or has no storage");
  ZT_CHECK(t.is_contiguous(), "[comm] ", coll_name(c), ": ", what, " tensor of shape ", shape_str(t.shape()),
           " must be contiguous");
  ZT_CHECK(t.device() == device, "[comm] ", coll_name(c), ": ", what, " tensor is on ", t.device(),
           ", but the group's tensors live on ", device);
}

void check_op(Coll c, ReduceOp op, DType d) {
  ZT_CHECK(op != ReduceOp::avg || is_floating(d), "[comm] ", coll_name(c),
           ": op avg needs a floating dtype (f32, bf16, f16), got ", dtype_name(d));
}

static void check_pair(Coll c, const Tensor& in, const Tensor& out, Device device) {
  check_buffer(c, in, "input", device);
  check_buffer(c, out, "output", device);
  ZT_CHECK(in.dtype() == out.dtype(), "[comm] ", coll_name(c), ": input dtype ", dtype_name(in.dtype()),
           " differs from output dtype ", dtype_name(out.dtype()));
}

void check_reduce_scatter(int size, const Tensor& in, const Tensor& out, Device device) {
  check_pair(Coll::reduce_scatter, in, out, device);
  ZT_CHECK(in.numel() == int64_t(size) * out.numel(), "[comm] reduce_scatter: input has ", in.numel(),
           " elements, expected group size ", size, " x output ", out.numel(), " = ", int64_t(size) * out.numel());
}

void check_all_gather(int size, const Tensor& in, const Tensor& out, Device device) {
  check_pair(Coll::all_gather, in, out, device);
  ZT_CHECK(out.numel() == int64_t(size) * in.numel(), "[comm] all_gather: output has ", out.numel(),
           " elements, expected group size ", size, " x input ", in.numel(), " = ", int64_t(size) * in.numel());
}

void check_all_to_all(int size, const Tensor& in, const Tensor& out, Device device) {
  check_pair(Coll::all_to_all, in, out, device);
  ZT_CHECK(in.numel() == out.numel() && in.numel() % size == 0, "[comm] all_to_all: input has ", in.numel(),
           " and output ", out.numel(), " elements; both must be the same multiple of the group size ", size);
  ZT_CHECK(!overlaps(in, out), "[comm] all_to_all: input and output must not overlap");
}

void check_root(int size, int root) {
  ZT_CHECK(root >= 0 && root < size, "[comm] broadcast: root ", root, " is outside the group [0, ", size, ")");
}

void check_peer(Coll c, int size, int rank, int peer) {
  ZT_CHECK(peer >= 0 && peer < size && peer != rank, "[comm] ", coll_name(c), ": peer ", peer,
           " is not another rank of the group (rank ", rank, " of ", size, ")");
}

bool overlaps(const Tensor& a, const Tensor& b) {
  if (a.nbytes() == 0 || b.nbytes() == 0 || a.storage() != b.storage()) return false;
  auto pa = static_cast<const char*>(a.raw_data()), pb = static_cast<const char*>(b.raw_data());
  return pa < pb + b.nbytes() && pb < pa + a.nbytes();
}

namespace {
class DoneWork : public Work {
 public:
  using Work::Work;
  void wait() override {}
  bool test() override { return true; }
};

// Applies f in fp32 to every element of a floating tensor, rounding 16-bit results once.
template <typename F>
void map_floating(Tensor& t, F f) {
  const int64_t n = t.numel();
  switch (t.dtype()) {
    case DType::f32:
      for (float *p = t.data<float>(), *e = p + n; p != e; ++p) *p = f(*p);
      return;
    case DType::bf16:
      for (bf16 *p = t.data<bf16>(), *e = p + n; p != e; ++p) *p = float_to_bf16(f(bf16_to_float(*p)));
      return;
    case DType::f16:
      for (f16 *p = t.data<f16>(), *e = p + n; p != e; ++p) *p = float_to_f16(f(f16_to_float(*p)));
      return;
    case DType::i32:
    case DType::i64:
      break;
  }
  ZT_ASSERT(false, "[comm] map_floating on ", dtype_name(t.dtype()));
}

template <typename T, typename U>
void multiply_int(Tensor& t, int size) {
  for (T *p = t.data<T>(), *e = p + t.numel(); p != e; ++p) *p = T(U(*p) * U(size));
}
}  // namespace

WorkPtr done_work(uint64_t seq) { return std::make_shared<DoneWork>(seq); }

void copy_bytes(const Tensor& in, Tensor& out) {
  ZT_ASSERT(in.nbytes() == out.nbytes());
  if (in.nbytes() > 0 && in.raw_data() != out.raw_data()) std::memmove(out.raw_data(), in.raw_data(), in.nbytes());
}

void divide_(Tensor& t, int size) {
  const float s = float(size);
  map_floating(t, [s](float x) { return x / s; });
}

void multiply_(Tensor& t, int size) {
  if (t.dtype() == DType::i32) return multiply_int<int32_t, uint32_t>(t, size);
  if (t.dtype() == DType::i64) return multiply_int<int64_t, uint64_t>(t, size);
  const float s = float(size);
  map_floating(t, [s](float x) { return x * s; });
}

int world_rank() {
  static const int rank = [] {
    for (const char* var : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK"})
      if (const char* v = std::getenv(var)) return std::atoi(v);
    return 0;
  }();
  return rank;
}

std::string call_name(Coll c, uint64_t seq, const std::string& label) {
  return zt::detail::concat(coll_name(c), " #", seq, label.empty() ? "" : " (" + label + ")");
}

std::string timeout_message(Coll c, uint64_t seq, double seconds, int rank, int size, const std::string& label,
                            const std::string& why) {
  char secs[32];
  std::snprintf(secs, sizeof secs, "%.1f", seconds);
  return zt::detail::concat("[comm] ", coll_name(c), " timed out after ", secs, " s on rank ", rank, " of ", size,
                            " (#", seq, label.empty() ? "" : ", " + label,
                            "): ", why.empty() ? "a peer stalled or died" : why);
}

std::string not_arrived(const std::vector<int>& ranks) {
  if (ranks.empty()) return "";
  std::string list;
  for (int q : ranks) list += (list.empty() ? "" : ", ") + std::to_string(q);
  return (ranks.size() == 1 ? "rank " : "ranks ") + list + " did not arrive (stalled or died)";
}

}  // namespace detail
}  // namespace zt::comm
