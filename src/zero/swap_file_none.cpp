// SwapFile in a build without liburing: optimizer offload to disk is not available.
#include "swap_file.h"
#include "zt/core/error.h"

namespace zt::zero {

struct SwapFile::Impl {};

SwapFile::SwapFile(std::string path, int64_t, size_t, int, const SwapOptions&) : path_(std::move(path)) {
  ZT_THROW_AS(ErrorKind::config,
              "[offload] offload to nvme (offload_optimizer / offload_param) is not available in this build: it needs ",
              "io_uring (install liburing-dev and rebuild; scripts/setup.sh does)");
}
SwapFile::~SwapFile() = default;
bool SwapFile::available() { return false; }
bool SwapFile::direct() const { return false; }
void SwapFile::read(int64_t, void*, int) {}
void SwapFile::write(int64_t, const void*, int) {}
void SwapFile::wait(int) {}
void SwapFile::wait_all() {}

}  // namespace zt::zero
