#include "file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "zt/core/error.h"

namespace zt::ckpt::detail {

namespace {
std::string errno_text() { return std::strerror(errno); }
}  // namespace

FileWriter::FileWriter(const std::string& path, uint64_t expected_bytes, bool direct)
    : path_(path), expected_(expected_bytes) {
  if (direct) {
    fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_DIRECT, 0644);
    direct_ = fd_ >= 0;
  }
  if (fd_ < 0) fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ZT_CHECK_AS(ErrorKind::checkpoint, fd_ >= 0, "[ckpt] cannot create ", path, ": ", errno_text());
  hash_ = XXH64_createState();
  XXH64_reset(hash_, 0);
}

FileWriter::~FileWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (hash_) XXH64_freeState(hash_);
}

void FileWriter::write_aligned(const void* data, size_t bytes) {
  if (!direct_) return write(data, bytes);
  XXH64_update(hash_, data, bytes);
  const size_t whole = (bytes + 4095) / 4096 * 4096;
  put(static_cast<const char*>(data), whole);
  written_ = bytes;
  ZT_CHECK_AS(ErrorKind::checkpoint, ::ftruncate(fd_, off_t(bytes)) == 0, "[ckpt] cannot cut ", path_, " to ", bytes,
              " bytes: ", errno_text());
}

void FileWriter::write(const void* data, size_t bytes) {
  XXH64_update(hash_, data, bytes);
  put(static_cast<const char*>(data), bytes);
}

void FileWriter::put(const char* p, size_t bytes) {
  while (bytes > 0) {
    const ssize_t n = ::write(fd_, p, bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EINVAL && direct_) {  // a file system that takes O_DIRECT at open but not here
      direct_ = false;
      ZT_CHECK_AS(ErrorKind::checkpoint, ::fcntl(fd_, F_SETFL, ::fcntl(fd_, F_GETFL) & ~O_DIRECT) == 0,
                  "[ckpt] cannot write ", path_, " without O_DIRECT: ", errno_text());
      continue;
    }
    ZT_CHECK_AS(ErrorKind::checkpoint, n > 0, "[ckpt] cannot write ", path_, " after ", written_,
                " bytes: ", n < 0 ? errno_text() : "no progress", " (the file needs ", expected_, " bytes)");
    p += n;
    bytes -= size_t(n);
    written_ += uint64_t(n);
  }
}

void FileWriter::finish() {
  ZT_CHECK_AS(ErrorKind::checkpoint, ::fsync(fd_) == 0, "[ckpt] cannot flush ", path_, ": ", errno_text(),
              " (the file needs ", expected_, " bytes)");
  const int rc = ::close(fd_);
  fd_ = -1;
  ZT_CHECK_AS(ErrorKind::checkpoint, rc == 0, "[ckpt] cannot close ", path_, ": ", errno_text());
}

uint64_t FileWriter::checksum() const { return XXH64_digest(hash_); }

void write_file_durable(const std::string& path, const std::string& text) {
  std::random_device rd;
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(rd());
  try {
    FileWriter w(tmp, text.size());
    w.write(text.data(), text.size());
    w.finish();
  } catch (...) {
    ::unlink(tmp.c_str());
    throw;
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = errno_text();
    ::unlink(tmp.c_str());
    ZT_THROW_AS(ErrorKind::checkpoint, "[ckpt] cannot rename ", tmp, " to ", path, ": ", why);
  }
}

void fsync_dir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ZT_CHECK_AS(ErrorKind::checkpoint, fd >= 0, "[ckpt] cannot open folder ", dir, ": ", errno_text());
  const int rc = ::fsync(fd);
  ::close(fd);
  ZT_CHECK_AS(ErrorKind::checkpoint, rc == 0, "[ckpt] cannot flush folder ", dir, ": ", errno_text());
}

uint64_t file_checksum(const std::string& path, uint64_t* bytes_out) {
  struct stat st {};
  ZT_CHECK_AS(ErrorKind::checkpoint, ::stat(path.c_str(), &st) == 0, "[ckpt] ", path, ": ", errno_text());
  ZT_CHECK_AS(ErrorKind::checkpoint, S_ISREG(st.st_mode), "[ckpt] ", path, " is not a regular file");
  FileReader r(path);
  XXH64_state_t* h = XXH64_createState();
  XXH64_reset(h, 0);
  std::vector<char> buf(size_t(1) << 20);
  uint64_t off = 0;
  while (off < uint64_t(st.st_size)) {
    const size_t n = size_t(std::min<uint64_t>(buf.size(), uint64_t(st.st_size) - off));
    r.read_at(buf.data(), n, off);
    XXH64_update(h, buf.data(), n);
    off += n;
  }
  const uint64_t sum = XXH64_digest(h);
  XXH64_freeState(h);
  if (bytes_out) *bytes_out = uint64_t(st.st_size);
  return sum;
}

std::string hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", (unsigned long long)v);
  return buf;
}

FileReader::FileReader(const std::string& path) : path_(path) {
  struct stat st {};
  ZT_CHECK_AS(ErrorKind::checkpoint, ::stat(path.c_str(), &st) == 0, "[ckpt] cannot open ", path, ": ", errno_text());
  ZT_CHECK_AS(ErrorKind::checkpoint, S_ISREG(st.st_mode), "[ckpt] ", path, " is not a regular file");
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ZT_CHECK_AS(ErrorKind::checkpoint, fd_ >= 0, "[ckpt] cannot open ", path, ": ", errno_text());
}

FileReader::~FileReader() {
  if (fd_ >= 0) ::close(fd_);
}

void FileReader::read_at(void* dst, size_t bytes, uint64_t offset) const {
  char* p = static_cast<char*>(dst);
  while (bytes > 0) {
    const ssize_t n = ::pread(fd_, p, bytes, off_t(offset));
    if (n < 0 && errno == EINTR) continue;
    ZT_CHECK_AS(ErrorKind::checkpoint, n > 0, "[ckpt] ", path_, " is truncated: cannot read ", bytes,
                " bytes at offset ", offset, n < 0 ? ": " + errno_text() : "");
    p += n;
    bytes -= size_t(n);
    offset += uint64_t(n);
  }
}

}  // namespace zt::ckpt::detail
