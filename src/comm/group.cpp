// Backend-independent parts of the comm layer: names, stats, checks, backend selection.
#include <cstdio>
#include <cstdlib>

#include "comm_detail.h"

namespace zt::comm {

const char* coll_name(Coll c) {
  switch (c) {
    case Coll::all_reduce: return "all_reduce";
    case Coll::reduce_scatter: return "reduce_scatter";
    case Coll::all_gather: return "all_gather";
    case Coll::broadcast: return "broadcast";
    case Coll::barrier: return "barrier";
  }
  return "unknown";
}

uint64_t CommStats::total_bytes() const {
  uint64_t sum = 0;
  for (uint64_t b : bytes) sum += b;
  return sum;
}

double Group::all_reduce_scalar(double v, ReduceOp op) {
  Tensor t = Tensor::empty({1}, DType::f32, MemTag::comm);
  *t.data<float>() = float(v);
  all_reduce(t, op);
  return double(*t.data<float>());
}

bool launched_by_mpirun() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMIX_RANK") != nullptr;
}

GroupPtr make_group(const std::string& backend) {
  if (backend == "local") return detail::make_local_group();
  if (backend == "mpi") return detail::make_mpi_group();
  if (backend == "auto") return launched_by_mpirun() ? detail::make_mpi_group() : detail::make_local_group();
  ZT_THROW("[comm] unknown backend '", backend, "'; allowed: local, mpi, auto");
}

namespace detail {

void check_buffer(Coll c, const Tensor& t, const char* what) {
  ZT_CHECK(t.defined() && t.has_storage(), "[comm] ", coll_name(c), ": ", what,
           " tensor is undefined or has no storage");
  ZT_CHECK(t.is_contiguous(), "[comm] ", coll_name(c), ": ", what, " tensor of shape ",
           shape_str(t.shape()), " must be contiguous");
  DType d = t.dtype();
  ZT_CHECK(d == DType::f32 || d == DType::i32 || d == DType::i64, "[comm] ", coll_name(c), ": ",
           what, " dtype ", dtype_name(d), " is not supported; allowed: f32, i32, i64");
}

static void check_pair(Coll c, const Tensor& in, const Tensor& out) {
  check_buffer(c, in, "input");
  check_buffer(c, out, "output");
  ZT_CHECK(in.dtype() == out.dtype(), "[comm] ", coll_name(c), ": input dtype ",
           dtype_name(in.dtype()), " differs from output dtype ", dtype_name(out.dtype()));
}

void check_reduce_scatter(int size, const Tensor& in, const Tensor& out) {
  check_pair(Coll::reduce_scatter, in, out);
  ZT_CHECK(in.numel() == int64_t(size) * out.numel(), "[comm] reduce_scatter: input has ",
           in.numel(), " elements, expected group size ", size, " x output ", out.numel(), " = ",
           int64_t(size) * out.numel());
}

void check_all_gather(int size, const Tensor& in, const Tensor& out) {
  check_pair(Coll::all_gather, in, out);
  ZT_CHECK(out.numel() == int64_t(size) * in.numel(), "[comm] all_gather: output has ",
           out.numel(), " elements, expected group size ", size, " x input ", in.numel(), " = ",
           int64_t(size) * in.numel());
}

void check_root(int size, int root) {
  ZT_CHECK(root >= 0 && root < size, "[comm] broadcast: root ", root, " is outside the group [0, ",
           size, ")");
}

bool overlaps(const Tensor& a, const Tensor& b) {
  if (a.nbytes() == 0 || b.nbytes() == 0 || a.storage() != b.storage()) return false;
  auto pa = static_cast<const char*>(a.raw_data()), pb = static_cast<const char*>(b.raw_data());
  return pa < pb + b.nbytes() && pb < pa + a.nbytes();
}

std::string timeout_message(Coll c, double seconds, int rank, int size, const std::string& context) {
  char secs[32];
  std::snprintf(secs, sizeof secs, "%.1f", seconds);
  std::string ctx = context.empty() ? "" : " (" + context + ")";
  return zt::detail::concat("[comm] ", coll_name(c), " timed out after ", secs, " s on rank ", rank, " of ",
                size, ctx, ": a peer stalled or died");
}

}  // namespace detail
}  // namespace zt::comm
