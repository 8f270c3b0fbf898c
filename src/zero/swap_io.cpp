// What the optimizer and parameter swaps share beside SwapFile itself: the rank's folder, page
// aligned buffers and element ranges read or patched through whole records (checkpoints).
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "swap_file.h"
#include "zt/core/atomic_file.h"
#include "zt/core/error.h"

namespace zt::zero {

// Note [swap path]: swap files live where others may write (configs/gpt_infinity.json uses
// /var/tmp), so below the user's nvme_path nothing is followed or shared: the run's folder and
// the rank's are made by us with mode 0700, or must already be folders (not links) of ours; a
// run's folder is named after its run.dir's whole path, so two runs never share one; a stale
// swap file of ours is replaced only if it is a regular file we own, and anything else at that
// path (a link, a FIFO, a device) is an error naming it, left as it was.
namespace {

void own_folder(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0700) == 0) return;
  const int err = errno;
  struct stat st{};
  ZT_CHECK_AS(ErrorKind::checkpoint, err == EEXIST && ::lstat(dir.c_str(), &st) == 0,
              "[offload] cannot create the swap folder ", dir, ": ", std::strerror(err));
  ZT_CHECK_AS(ErrorKind::checkpoint, !S_ISLNK(st.st_mode),
              "[offload] the swap folder ", dir, " is a symbolic link: swap files never follow links (remove it)");
  ZT_CHECK_AS(ErrorKind::checkpoint, S_ISDIR(st.st_mode), "[offload] the swap folder ", dir, " is ",
              file_type_name(st.st_mode), ", not a folder");
  ZT_CHECK_AS(ErrorKind::checkpoint, st.st_uid == ::geteuid(), "[offload] the swap folder ", dir, " belongs to uid ",
              st.st_uid, ", not to this user (uid ", ::geteuid(), "): choose another nvme_path or run.dir");
  if ((st.st_mode & 077) != 0)
    ZT_CHECK_AS(ErrorKind::checkpoint, ::chmod(dir.c_str(), 0700) == 0, "[offload] cannot make ", dir,
                " private: ", std::strerror(errno));
}

}  // namespace

std::string swap_run_name(const std::string& run_dir) {
  std::error_code ec;
  std::filesystem::path abs = std::filesystem::absolute(run_dir, ec).lexically_normal();
  if (!abs.has_filename()) abs = abs.parent_path();
  std::string name;
  for (char c : abs.filename().string()) name += std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' ? c : '_';
  const std::string whole = abs.string();
  char hash[17];
  std::snprintf(hash, sizeof hash, "%016llx", (unsigned long long)XXH64(whole.data(), whole.size(), 0));
  return (name.empty() ? std::string("run") : name.substr(0, 64)) + "-" + std::string(hash, 8);
}

std::string make_swap_folder(const std::string& run_dir, int rank) {
  std::error_code ec;
  const std::filesystem::path run(run_dir);
  // The user's nvme_path is taken as given; the run's folder below it and the rank's are ours.
  if (run.has_parent_path()) std::filesystem::create_directories(run.parent_path(), ec);
  ZT_CHECK_AS(ErrorKind::checkpoint, !ec, "[offload] cannot create the swap folder ", run.parent_path().string(), ": ",
              ec.message());
  own_folder(run_dir);
  const std::string dir = run_dir + "/rank" + std::to_string(rank);
  own_folder(dir);
  return dir;
}

void clear_stale_swap_file(const std::string& path) {
  struct stat st{};
  if (::lstat(path.c_str(), &st) != 0) return;  // nothing there (or no folder: creating it says why)
  ZT_CHECK_AS(ErrorKind::checkpoint, !S_ISLNK(st.st_mode), "[offload] ", path,
              " is a symbolic link: swap files never follow links (left as it is; remove it)");
  ZT_CHECK_AS(ErrorKind::checkpoint, S_ISREG(st.st_mode), "[offload] ", path, " is ", file_type_name(st.st_mode),
              ", not a swap file (left as it is; remove it)");
  ZT_CHECK_AS(ErrorKind::checkpoint, st.st_uid == ::geteuid(), "[offload] ", path, " belongs to uid ", st.st_uid,
              ", not to this user (left as it is)");
  ZT_CHECK_AS(ErrorKind::checkpoint, ::unlink(path.c_str()) == 0 || errno == ENOENT, "[offload] cannot replace ", path,
              ": ", std::strerror(errno));
}

SwapStats SwapFile::stats() const {
  SwapStats st;
  st.bytes_read = read_bytes_;
  st.bytes_written = written_bytes_;
  st.read_wait_s = read_wait_s_;
  st.write_wait_s = write_wait_s_;
  st.io_wait_s = read_wait_s_ + write_wait_s_;
  st.direct = direct();
  return st;
}

SwapStats& operator+=(SwapStats& a, const SwapStats& b) {
  a.bytes_read += b.bytes_read;
  a.bytes_written += b.bytes_written;
  a.io_wait_s += b.io_wait_s;
  a.read_wait_s += b.read_wait_s;
  a.write_wait_s += b.write_wait_s;
  a.compute_s += b.compute_s;
  a.down_s += b.down_s;
  a.up_s += b.up_s;
  a.bytes_down += b.bytes_down;
  a.bytes_up += b.bytes_up;
  a.early_s += b.early_s;
  a.early_wait_s += b.early_wait_s;
  a.early_updates += b.early_updates;
  a.early_redone += b.early_redone;
  a.direct = a.direct || b.direct;
  return a;
}

Tensor page_aligned(int64_t bytes, DType dtype) {
  const int64_t es = int64_t(dtype_size(dtype));
  Tensor raw = Tensor::empty({(bytes + 4096) / es}, dtype);
  const auto addr = reinterpret_cast<uintptr_t>(raw.raw_data());
  const int64_t skip = int64_t((4096 - addr % 4096) % 4096) / es;
  return Tensor::view_of(raw.storage(), raw.offset() + skip, {bytes / es}, dtype);
}

Tensor pinned_zeros(int64_t n, DType dtype, MemTag tag) {
  Tensor t = Tensor::empty_pinned({n}, dtype, tag);
  t.zero_();
  return t;
}

void swap_range(SwapFile& f, void* scratch, int64_t tile, size_t elem_bytes, size_t j, int64_t begin, int64_t n,
                void* dst, const void* src) {
  f.wait_all();
  char* rec = static_cast<char*>(scratch);
  for (int64_t e = begin; e < begin + n;) {
    const int64_t t = e / tile, in = e - t * tile, len = std::min(tile - in, begin + n - e);
    f.read(t, rec, 0);
    f.wait(0);
    char* p = rec + (int64_t(j) * tile + in) * int64_t(elem_bytes);
    const size_t at = size_t(e - begin) * elem_bytes, bytes = size_t(len) * elem_bytes;
    if (dst) std::memcpy(static_cast<char*>(dst) + at, p, bytes);
    if (src) {
      std::memcpy(p, static_cast<const char*>(src) + at, bytes);
      f.write(t, rec, 0);
      f.wait(0);
    }
    e += len;
  }
}

}  // namespace zt::zero
