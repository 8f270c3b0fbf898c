#pragma once
// The monitors' files: opened for appending, each write whole or cut off again (a killed or
// failed run leaves whole records), errors naming the file. `who` starts messages ("[tensorboard]").
#include <string>
#include <string_view>

namespace zt::monitor::detail {

// Creates `dir` and its parents as needed; throws naming it.
void create_folder(const std::string& dir, const char* who);
std::string in_folder(const std::string& dir, const std::string& name);  // "dir/name", one '/
// `path` opened for appending, created if absent (with `fresh`, only a file that was not there);
// anything but a regular file is refused, never written into (a FIFO would block).
int open_append(const std::string& path, bool fresh, const char* who);
// All of `bytes` at the end of the file, or the file cut back to its size before and a throw.
void append_all(int fd, const std::string& path, std::string_view bytes, const char* who);
void sync_file(int fd, const std::string& path, const char* who);
long long file_size(int fd, const std::string& path, const char* who);

}  // namespace zt::monitor::detail
