#pragma once
// A swap file of fixed-size records (tiles) read and written asynchronously, for optimizer
// offload to disk (Note [optimizer swap] in optim_shard.cpp). swap_file_uring.cpp does it with
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
  double io_wait_seconds() const { return wait_s_; }  // time spent blocked in wait()

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string path_;
  size_t record_ = 0;
  uint64_t read_bytes_ = 0, written_bytes_ = 0;
  double wait_s_ = 0;
};

}  // namespace zt::zero
