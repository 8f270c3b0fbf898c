#pragma once
// Reading outside files safely: opened without blocking (a FIFO is refused by fstat, never waited
// on), only regular files, errors ErrorKind::data naming the file. Internal to zt_data.
#include <cstddef>
#include <cstdint>
#include <string>

namespace zt::data::detail {

class InputFile {
 public:
  explicit InputFile(const std::string& path);
  ~InputFile();
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  uint64_t size() const { return size_; }
  // Which file it is, whatever path opened it.
  uint64_t device() const { return device_; }
  uint64_t inode() const { return inode_; }
  const std::string& path() const { return path_; }
  int fd() const { return fd_; }  // to map it; open while this object lives
  // Exactly n bytes at `offset`, or a data error naming the file and the offset.
  void read_at(void* dst, size_t n, uint64_t offset) const;

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0, device_ = 0, inode_ = 0;
};

// A whole regular file as bytes.
std::string read_file_bytes(const std::string& path);

}  // namespace zt::data::detail
