// What the optimizer and parameter swaps share beside SwapFile itself: the rank's folder, page
// aligned buffers and element ranges read or patched through whole records (checkpoints).
#include <cstring>
#include <filesystem>

#include "swap_file.h"
#include "zt/core/error.h"

namespace zt::zero {

std::string make_swap_folder(const std::string& run_dir, int rank) {
  const std::string dir = run_dir + "/rank" + std::to_string(rank);
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  ZT_CHECK_AS(ErrorKind::checkpoint, !ec, "[offload] cannot create the swap folder ", dir, ": ", ec.message());
  return dir;
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
