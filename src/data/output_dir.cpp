// Output folders swapped in whole (Note [output folders] in output_dir.h).
#include "output_dir.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <vector>

#include "input_file.h"
#include "zt/core/atomic_file.h"
#include "zt/core/error.h"

namespace zt::data::detail {

namespace fs = std::filesystem;

OutputDir::OutputDir(std::string path, std::string writer, const std::function<void(const std::string&)>& note)
    : path_(std::move(path)), writer_(std::move(writer)) {
  while (path_.size() > 1 && path_.back() == '/') path_.pop_back();
  ZT_CHECK_AS(ErrorKind::data, !path_.empty(), "[prepare] the output folder is empty");
  check_replaceable();
  std::error_code ec;
  const fs::path parent = fs::path(path_).parent_path();
  if (!parent.empty()) fs::create_directories(parent, ec);
  ZT_CHECK_AS(ErrorKind::data, !ec, "[prepare] cannot create ", parent.string(), ": ", ec.message());
  remove_stale_temporaries(note);
  tmp_ = unique_temp_path(path_);
  ZT_CHECK_AS(ErrorKind::data, fs::create_directory(tmp_, ec) && !ec, "[prepare] cannot create ", tmp_, ": ",
              ec ? ec.message() : "it exists");
  // Best effort: until the lock is taken, or where there is none, the live pid in the name keeps it.
  lock_fd_ = ::open(tmp_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (lock_fd_ >= 0) ::flock(lock_fd_, LOCK_SH);
}

OutputDir::~OutputDir() {
  if (lock_fd_ >= 0) ::close(lock_fd_);
  if (committed_) return;
  std::error_code ec;
  fs::remove_all(tmp_, ec);
}

void OutputDir::remove_stale_temporaries(const std::function<void(const std::string&)>& note) const {
  const fs::path dest(path_);
  const std::string base = dest.filename().string();
  std::error_code ec;
  std::vector<fs::path> candidates;
  for (fs::directory_iterator it(folder_of(path_), ec), end; !ec && it != end; it.increment(ec))
    if (is_temp_name_of(it->path().filename().string(), base)) candidates.push_back(it->path());
  std::sort(candidates.begin(), candidates.end());
  std::vector<std::string> removed;
  for (const fs::path& c : candidates) {
    struct stat st {};
    if (::lstat(c.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid()) continue;
    const std::string name = c.filename().string();  // "<base>.tmp.<pid>.<16 hex>"
    int pid = 0;
    const char* digits = name.c_str() + base.size() + 5;
    if (std::from_chars(digits, name.c_str() + name.size(), pid).ec != std::errc() || pid <= 0) continue;
    if (::kill(pid_t(pid), 0) == 0 || errno != ESRCH) continue;  // it runs (EPERM: as another user)
    const int fd = ::open(c.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) continue;
    // No holder: nothing writes it. Held, or flock unsupported: another host's or namespace's run.
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) {
      std::error_code rm;
      fs::remove_all(c, rm);
      if (!rm) removed.push_back(c.string());
    }
    ::close(fd);
  }
  if (removed.empty() || !note) return;
  std::string list;
  for (const std::string& r : removed) list += (list.empty() ? "" : ", ") + r;
  note("removed " + std::to_string(removed.size()) + " temporaries of interrupted runs beside --out " + path_ +
       " (their processes are gone): " + list);
}

std::string OutputDir::file(const std::string& name) const { return (fs::path(tmp_) / name).string(); }

void OutputDir::check_replaceable() const {
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(path_, ec);
  if (!fs::exists(st)) return;
  ZT_CHECK_AS(ErrorKind::data, fs::is_directory(st), "[prepare] ", path_,
              " exists and is not a folder; choose another --out");
  if (fs::is_empty(path_, ec)) return;
  const fs::path manifest = fs::path(path_) / "manifest.json";
  bool ours = false;
  try {
    const nlohmann::json m = nlohmann::json::parse(read_file_bytes(manifest.string()));
    ours = m.is_object() && m.value("writer", std::string()) == writer_;
  } catch (const std::exception&) {  // unreadable or not JSON: not ours
  }
  ZT_CHECK_AS(ErrorKind::data, ours, "[prepare] ", path_, " exists and was not written by ", writer_,
              " (no manifest.json saying so); it is left alone: remove it or choose another --out");
}

void OutputDir::commit() {
  ZT_CHECK(!committed_, "[prepare] OutputDir committed twice");
  sync_dir(tmp_, ErrorKind::data, "[prepare]");
  check_replaceable();  // again: something may have appeared there meanwhile
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(path_, ec))) {
    ZT_CHECK_AS(ErrorKind::data, ::rename(tmp_.c_str(), path_.c_str()) == 0, "[prepare] cannot rename ", tmp_, " to ",
                path_, ": ", std::strerror(errno));
  } else if (::renameat2(AT_FDCWD, tmp_.c_str(), AT_FDCWD, path_.c_str(), RENAME_EXCHANGE) == 0) {
    fs::remove_all(tmp_, ec);  // now the previous output
  } else {
    // No atomic exchange on this filesystem: the old output moves aside, then the new one in.
    ZT_CHECK_AS(ErrorKind::data, errno == EINVAL || errno == ENOSYS, "[prepare] cannot swap ", tmp_, " with ", path_,
                ": ", std::strerror(errno));
    const std::string old = unique_temp_path(path_);
    ZT_CHECK_AS(ErrorKind::data, ::rename(path_.c_str(), old.c_str()) == 0, "[prepare] cannot move ", path_,
                " aside: ", std::strerror(errno));
    ZT_CHECK_AS(ErrorKind::data, ::rename(tmp_.c_str(), path_.c_str()) == 0, "[prepare] cannot rename ", tmp_, " to ",
                path_, ": ", std::strerror(errno), " (the previous output is in ", old, ")");
    fs::remove_all(old, ec);
  }
  committed_ = true;
  sync_dir(folder_of(path_), ErrorKind::data, "[prepare]");
}

}  // namespace zt::data::detail
