// Regular files opened without blocking and read whole or at an offset (input_file.h).
#include "input_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "zt/core/atomic_file.h"
#include "zt/core/error.h"

namespace zt::data::detail {

InputFile::InputFile(const std::string& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  struct stat st {};
  if (fd_ < 0) {
    const int err = errno;  // a socket's ENXIO would read "No such device or address"
    if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
      ZT_THROW_AS(ErrorKind::data, "[data] ", path, " is ", file_type_name(st.st_mode), ", not a regular file");
    ZT_THROW_AS(ErrorKind::data, "[data] ", path, ": cannot open for reading: ", std::strerror(err));
  }
  if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
    const unsigned mode = st.st_mode;
    ::close(fd_);
    fd_ = -1;
    ZT_THROW_AS(ErrorKind::data, "[data] ", path, " is ", file_type_name(mode), ", not a regular file");
  }
  size_ = uint64_t(st.st_size);
  device_ = uint64_t(st.st_dev);
  inode_ = uint64_t(st.st_ino);
}

InputFile::~InputFile() {
  if (fd_ >= 0) ::close(fd_);
}

void InputFile::read_at(void* dst, size_t n, uint64_t offset) const {
  size_t got = 0;
  while (got < n) {
    const ssize_t r = ::pread(fd_, static_cast<char*>(dst) + got, n - got, off_t(offset + got));
    if (r < 0 && errno == EINTR) continue;
    ZT_CHECK_AS(ErrorKind::data, r >= 0, "[data] ", path_, ": read error at byte offset ", offset + got, ": ",
                std::strerror(errno));
    ZT_CHECK_AS(ErrorKind::data, r > 0, "[data] ", path_, ": truncated at byte offset ", offset + got,
                " (the file shrank while being read)");
    got += size_t(r);
  }
}

std::string read_file_bytes(const std::string& path) {
  InputFile f(path);
  std::string out(size_t(f.size()), '\0');
  f.read_at(out.data(), out.size(), 0);
  return out;
}

}  // namespace zt::data::detail
