// Compiled instead of nccl.cpp when the build has no CUDA: the one place that says so.
#include "comm_detail.h"
#include "zt/comm/store.h"

namespace zt::comm {
namespace {
[[noreturn]] void not_built() {
  ZT_THROW_AS(ErrorKind::comm, "[comm] backend 'nccl' is not available in this build (built without CUDA)");
}
}  // namespace

bool nccl_available() { return false; }

GroupPtr make_nccl_group(int, int, int, Store&, const std::string&, double) { not_built(); }

namespace detail {
GroupPtr make_launched_nccl_group() { not_built(); }
}  // namespace detail

}  // namespace zt::comm
