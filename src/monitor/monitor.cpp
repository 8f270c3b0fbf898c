#include "zt/monitor/monitor.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "append_file.h"
#include "zt/core/append_file.h"
#include "zt/core/atomic_file.h"
#include "zt/core/error.h"

namespace zt::monitor {

namespace {
constexpr ErrorKind kIo = ErrorKind::checkpoint;  // the run's outputs could not be written
}

std::string log_dir_of(const std::string& output_path, const std::string& job_name) {
  if (output_path.empty() || (!job_name.empty() && job_name[0] == '/')) return job_name;
  return output_path.back() == '/' ? output_path + job_name : output_path + "/" + job_name;
}

namespace detail {

void create_folder(const std::string& dir, const char* who) {
  ZT_CHECK_AS(ErrorKind::invalid_argument, !dir.empty(), who,
              " the output folder is empty: set output_path or job_name");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  ZT_CHECK_AS(kIo, !ec, who, " cannot create folder ", dir, ": ", ec.message());
}

std::string in_folder(const std::string& dir, const std::string& name) {
  return dir.back() == '/' ? dir + name : dir + "/" + name;
}

int open_append(const std::string& path, bool fresh, const char* who) { return zt::open_append(path, fresh, kIo, who); }

long long file_size(int fd, const std::string& path, const char* who) {
  struct stat st {};
  ZT_CHECK_AS(kIo, ::fstat(fd, &st) == 0, who, " cannot stat ", path, ": ", std::strerror(errno));
  return (long long)st.st_size;
}

void append_all(int fd, const std::string& path, std::string_view bytes, const char* who) {
  append_whole(fd, path, bytes, file_size(fd, path, who), kIo, who);
}

void sync_file(int fd, const std::string& path, const char* who) {
  ZT_CHECK_AS(kIo, ::fsync(fd) == 0, who, " cannot sync ", path, ": ", std::strerror(errno));
}

}  // namespace detail
}  // namespace zt::monitor
