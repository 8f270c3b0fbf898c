// Output folders swapped in whole (Note [output folders] in output_dir.h).
#include "output_dir.h"

#include <fcntl.h>
#include <stdio.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "input_file.h"
#include "zt/core/atomic_file.h"
#include "zt/core/error.h"

namespace zt::data::detail {

namespace fs = std::filesystem;

OutputDir::OutputDir(std::string path, std::string writer) : path_(std::move(path)), writer_(std::move(writer)) {
  while (path_.size() > 1 && path_.back() == '/') path_.pop_back();
  ZT_CHECK_AS(ErrorKind::data, !path_.empty(), "[prepare] the output folder is empty");
  check_replaceable();
  std::error_code ec;
  const fs::path parent = fs::path(path_).parent_path();
  if (!parent.empty()) fs::create_directories(parent, ec);
  ZT_CHECK_AS(ErrorKind::data, !ec, "[prepare] cannot create ", parent.string(), ": ", ec.message());
  tmp_ = unique_temp_path(path_);
  ZT_CHECK_AS(ErrorKind::data, fs::create_directory(tmp_, ec) && !ec, "[prepare] cannot create ", tmp_, ": ",
              ec ? ec.message() : "it exists");
}

OutputDir::~OutputDir() {
  if (committed_) return;
  std::error_code ec;
  fs::remove_all(tmp_, ec);
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
