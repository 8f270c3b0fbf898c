#pragma once
// Durable file operations for checkpoints (private to zt_ckpt): writes that report what and
// where on failure (including the bytes a full disk would have needed), fsync of files and
// folders, and reads at an offset.
#include <cstdint>
#include <string>

#include <xxhash.h>

namespace zt::ckpt::detail {

// Sequential writer of one file: every write is checked; finish() fsyncs and closes.
class FileWriter {
 public:
  // direct: O_DIRECT where the file system takes it (no page-cache copy, no flusher threads on the
  // cores training uses), for write_aligned; buffered otherwise.
  FileWriter(const std::string& path, uint64_t expected_bytes, bool direct = false);
  ~FileWriter();
  FileWriter(const FileWriter&) = delete;
  FileWriter& operator=(const FileWriter&) = delete;
  void write(const void* data, size_t bytes);
  // The whole file at once from 4 KiB-aligned memory readable up to `bytes` rounded up to 4 KiB
  // (an O_DIRECT file is written in whole blocks, then cut to `bytes`).
  void write_aligned(const void* data, size_t bytes);
  void finish();
  uint64_t bytes() const { return written_; }
  uint64_t checksum() const;  // xxh64 of everything written

 private:
  std::string path_;
  void put(const char* p, size_t bytes);  // every byte, or an error naming the file and the bytes needed
  int fd_ = -1;
  bool direct_ = false;
  uint64_t expected_ = 0, written_ = 0;
  XXH64_state_t* hash_ = nullptr;
};

void write_file_durable(const std::string& path, const std::string& text);  // temp name, fsync, rename
void fsync_dir(const std::string& dir);
uint64_t file_checksum(const std::string& path, uint64_t* bytes_out);  // xxh64 of the whole file
std::string hex64(uint64_t v);

// Reads [offset, offset + bytes) of a file opened once; throws naming the file on a short read.
class FileReader {
 public:
  explicit FileReader(const std::string& path);
  ~FileReader();
  FileReader(const FileReader&) = delete;
  FileReader& operator=(const FileReader&) = delete;
  void read_at(void* dst, size_t bytes, uint64_t offset) const;

 private:
  std::string path_;
  int fd_ = -1;
};

}  // namespace zt::ckpt::detail
