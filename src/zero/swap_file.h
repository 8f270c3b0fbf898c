#pragma once
// A swap file of fixed-size records (tiles) read and written asynchronously, for optimizer
// offload to disk (Note [optimizer swap] in residence_file.cpp). swap_file_uring.cpp does it with
// io_uring, O_DIRECT where the filesystem allows; swap_file_none.cpp, compiled without
// liburing, answers "not available in this build".
//
// Every record's xxh64 is kept in memory when it is written and checked when it is read back,
// so a truncated, corrupted or replaced file is an error naming the file, the tile and its byte
// offset, never wrong state.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "zt/core/tensor.h"
#include "zt/zero/policy.h"

namespace zt::zero {

class SwapFile {
 public:
  // Creates (truncates) `path` for `tiles` records of `record_bytes` (a multiple of 4096).
  // Up to `slots` operations may be in flight, one per slot. ErrorKind::checkpoint on failure.
  SwapFile(std::string path, int64_t tiles, size_t record_bytes, int slots, const SwapOptions& opts);
  ~SwapFile();  // waits for what is in flight, closes and removes the file
  SwapFile(const SwapFile&) = delete;
  SwapFile& operator=(const SwapFile&) = delete;

  // Starts reading record t into buf (4096-aligned, record_bytes) on `slot`; the slot must be idle.
  void read(int64_t t, void* buf, int slot);
  // Starts writing buf as record t on `slot`; buf must stay untouched until wait(slot).
  void write(int64_t t, const void* buf, int slot);
  // Waits for the slot's operation; a read is then verified against the record's checksum.
  void wait(int slot);
  void wait_all();

  static bool available();  // whether this build can swap (liburing)
  const std::string& path() const { return path_; }
  size_t record_bytes() const { return record_; }
  bool direct() const;  // O_DIRECT in use
  uint64_t bytes_read() const { return read_bytes_; }
  uint64_t bytes_written() const { return written_bytes_; }
  double io_wait_seconds() const { return read_wait_s_ + write_wait_s_; }  // time spent blocked in wait()
  double read_wait_seconds() const { return read_wait_s_; }
  double write_wait_seconds() const { return write_wait_s_; }
  // This file's I/O as SwapStats (compute_s 0).
  SwapStats stats() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string path_;
  size_t record_ = 0;
  uint64_t read_bytes_ = 0, written_bytes_ = 0;
  double read_wait_s_ = 0, write_wait_s_ = 0;
};

// Helpers shared by the optimizer and parameter swaps (swap_io.cpp).
// Note [swap path] (swap_io.cpp): creates <dir> and this rank's <dir>/rank<r> as private folders
// of ours (or checks the ones there) and returns the latter; ErrorKind::checkpoint if it cannot.
std::string make_swap_folder(const std::string& dir, int rank);
// Removes a stale swap file of ours at `path` before it is made anew; anything else there (a
// link, a FIFO, a device, another user's file) is an error naming it, left as it was.
void clear_stale_swap_file(const std::string& path);
// `bytes` (a multiple of the dtype's size) whose data starts on a 4 KiB boundary, as O_DIRECT
// needs: allocated under the current tag with 4096 bytes of slack.
Tensor page_aligned(int64_t bytes, DType dtype);
// n zeros in pinned host memory (ordinary host memory in a build without CUDA), tagged `tag`:
// what a device's offloaded states and parameters live in (Note [host residence]).
Tensor pinned_zeros(int64_t n, DType dtype, MemTag tag);
// Elements [begin, begin + n) of tensor j of a file whose records hold tensors of `tile` elements
// of `elem_bytes` each, one after another: read into dst, or written from src (read, patched and
// written back). `scratch` holds one record (page aligned); slot 0 is used once all are idle.
void swap_range(SwapFile& f, void* scratch, int64_t tile, size_t elem_bytes, size_t j, int64_t begin, int64_t n,
                void* dst, const void* src);

}  // namespace zt::zero
