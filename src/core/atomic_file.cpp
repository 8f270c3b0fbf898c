#include "zt/core/atomic_file.h"

#include "zt/core/append_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <utility>

namespace zt {

const char* file_type_name(unsigned mode) {
  const mode_t m = mode_t(mode);
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISDIR(m)) return "a directory";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISSOCK(m)) return "a socket";
  return "not a regular file";
}

std::string folder_of(const std::string& path) {
  const std::string parent = std::filesystem::path(path).parent_path().string();
  return parent.empty() ? "." : parent;
}

std::string unique_temp_path(const std::string& path) {
  static thread_local std::mt19937_64 gen{(uint64_t(std::random_device{}()) << 32) ^ std::random_device{}()};
  char suffix[64];
  std::snprintf(suffix, sizeof suffix, ".tmp.%ld.%016llx", long(::getpid()), (unsigned long long)gen());
  return path + suffix;
}

bool is_temp_name_of(const std::string& name, const std::string& base) {
  const std::string head = base + ".tmp.";
  if (name.size() <= head.size() + 17 || name.compare(0, head.size(), head) != 0) return false;
  const std::string rest = name.substr(head.size());  // "<pid>.<16 hex>"
  const size_t dot = rest.find('.');
  if (dot == 0 || dot == std::string::npos || rest.size() - dot - 1 != 16) return false;
  for (size_t i = 0; i < rest.size(); ++i)
    if (i != dot && !(i < dot ? std::isdigit((unsigned char)rest[i]) : std::isxdigit((unsigned char)rest[i])))
      return false;
  return true;
}

void check_output_path(const std::string& path, ErrorKind kind, const std::string& who) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return;  // absent (or a dangling link, which rename replaces)
  ZT_CHECK_AS(kind, S_ISREG(st.st_mode), who, " ", path, " is ", file_type_name(st.st_mode),
              ", not a regular file: remove it or write elsewhere");
}

void sync_dir(const std::string& dir, ErrorKind kind, const std::string& who) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ZT_CHECK_AS(kind, fd >= 0, who, " cannot open folder ", dir, " to sync it: ", std::strerror(errno));
  const int rc = ::fsync(fd), err = errno;
  ::close(fd);
  // Some filesystems cannot sync a folder (EINVAL); the renames are then as durable as they get.
  ZT_CHECK_AS(kind, rc == 0 || err == EINVAL, who, " cannot sync folder ", dir, ": ", std::strerror(err));
}

AtomicFile::AtomicFile(std::string path, ErrorKind kind, std::string who)
    : path_(std::move(path)), who_(std::move(who)), kind_(kind) {
  check_output_path(path_, kind_, who_);
  tmp_ = unique_temp_path(path_);
  // O_EXCL: never anything that was already there; O_NONBLOCK would not matter for a new file.
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
  if (fd_ < 0) {
    const int err = errno;
    const std::string tmp = std::exchange(tmp_, "");  // not ours: never removed
    ZT_THROW_AS(kind_, who_, " cannot create ", tmp, " (the temporary for ", path_, "): ", std::strerror(err));
  }
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_ && !tmp_.empty()) ::unlink(tmp_.c_str());
}

void AtomicFile::fail(const std::string& what, int err) {
  ZT_THROW_AS(kind_, who_, " ", what, " ", tmp_, " (for ", path_, ") failed: ", std::strerror(err));
}

void AtomicFile::write(const void* data, size_t n) {
  ZT_CHECK_AS(ErrorKind::internal, fd_ >= 0 && !committed_, who_, " write to ", path_, " after finish()");
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd_, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) fail("writing", w < 0 ? errno : ENOSPC);
    p += w;
    n -= size_t(w);
  }
}

void AtomicFile::finish() {
  if (fd_ < 0) return;
  int rc;
  do rc = ::fsync(fd_);
  while (rc != 0 && errno == EINTR);
  if (rc != 0) fail("syncing", errno);
  rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0 && errno != EINTR) fail("closing", errno);
}

void AtomicFile::commit() {
  ZT_CHECK_AS(ErrorKind::internal, !committed_, who_, " ", path_, " committed twice");
  finish();
  check_output_path(path_, kind_, who_);  // again: something may have appeared meanwhile
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
    const int err = errno;
    ZT_THROW_AS(kind_, who_, " cannot rename ", tmp_, " to ", path_, ": ", std::strerror(err));
  }
  committed_ = true;
}

void write_file_atomic(const std::string& path, std::string_view text, ErrorKind kind, const std::string& who) {
  AtomicFile f(path, kind, who);
  f.write(text);
  f.commit();
  sync_dir(folder_of(path), kind, who);
}

int open_append(const std::string& path, bool fresh, ErrorKind kind, const std::string& who) {
  const int flags = O_WRONLY | O_APPEND | O_CREAT | O_NONBLOCK | O_CLOEXEC | (fresh ? O_EXCL : 0);
  const int fd = ::open(path.c_str(), flags, 0666), err = errno;
  if (fd < 0 && err == ENXIO) check_output_path(path, kind, who);  // a FIFO with no reader
  ZT_CHECK_AS(kind, fd >= 0, who, " cannot open ", path, " for appending: ", std::strerror(err));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    check_output_path(path, kind, who);
    ZT_THROW_AS(kind, who, " ", path, " is not a regular file");
  }
  return fd;
}

void append_whole(int fd, const std::string& path, std::string_view bytes, long long size_before, ErrorKind kind,
                  const std::string& who) {
  int err = 0;
  for (size_t done = 0; done < bytes.size() && !err;) {
    const ssize_t w = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (w > 0)
      done += size_t(w);
    else if (w == 0)
      err = ENOSPC;
    else if (errno != EINTR)
      err = errno;
  }
  if (err && ::ftruncate(fd, off_t(size_before)) != 0)
    std::fprintf(stderr, "zerotrain: warning: %s may end in a partial record\n", path.c_str());
  ZT_CHECK_AS(kind, !err, who, " appending to ", path, " failed: ", std::strerror(err));
}

}  // namespace zt
