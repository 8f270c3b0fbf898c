#pragma once
// Files written whole or not at all (Note [atomic files]): the bytes go to a fresh temporary
// beside the destination, are fsynced, and rename() moves them over it in one step.
//
// Note [atomic files]: the temporary's name is unique per call ("<path>.tmp.<pid>.<16 hex>",
// created with O_EXCL), so two writers never share it (two runs sharing one fixed name tore
// each other's weights), and whatever already sits at that name (a FIFO would block the writer
// forever) is an error, never opened. rename() makes the new bytes visible at once, fsync
// before it makes them survive a crash, and fsync of the folder afterwards makes the rename
// survive; a caller that renames several files syncs the folder once after the last.
#include <cstddef>
#include <string>
#include <string_view>

#include "zt/core/error.h"

namespace zt {

// "<path>.tmp.<pid>.<16 hex digits>", different on every call.
std::string unique_temp_path(const std::string& path);
// Whether `name` (a file name, no folder) is `base`'s temporary from unique_temp_path.
bool is_temp_name_of(const std::string& name, const std::string& base);

// Throws `kind` ("<who> <path> is a FIFO, not a regular file ...") unless `path` is absent
// or a regular file, symlinks followed: outputs are never written into anything else.
void check_output_path(const std::string& path, ErrorKind kind, const std::string& who);

// fsync of a folder, after renames into it; throws `kind` naming it.
void sync_dir(const std::string& dir, ErrorKind kind, const std::string& who);
std::string folder_of(const std::string& path);  // "." for a bare file name
// What a stat mode that is not a regular file is, for messages: "a FIFO", "a directory", ...
const char* file_type_name(unsigned mode);

class AtomicFile {
 public:
  // Checks `path` (check_output_path) and creates its unique temporary; errors are `kind`,
  // messages start with `who` (e.g. "[safetensors]").
  explicit AtomicFile(std::string path, ErrorKind kind = ErrorKind::checkpoint, std::string who = "[io]");
  ~AtomicFile();  // removes the temporary unless committed
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, size_t n);  // every byte or a throw ("No space left on device")
  void write(std::string_view s) { write(s.data(), s.size()); }
  void finish();  // fsync and close: the bytes are on disk under temp_path()
  void commit();  // finish() if not yet, then rename onto path(); the caller syncs the folder

  const std::string& path() const { return path_; }
  const std::string& temp_path() const { return tmp_; }

 private:
  [[noreturn]] void fail(const std::string& what, int err);
  std::string path_, tmp_, who_;
  ErrorKind kind_;
  int fd_ = -1;
  bool committed_ = false;
};

// AtomicFile + commit + sync_dir of the folder, for one small file.
void write_file_atomic(const std::string& path, std::string_view text, ErrorKind kind, const std::string& who);

}  // namespace zt
