#pragma once
// Appending to a file whole or not at all: a write that fails part-way (a full disk) is cut back
// off, so a killed or failed run leaves whole records (metrics lines, event records, CSV rows).
#include <string>
#include <string_view>

#include "zt/core/error.h"

namespace zt {

// All of `bytes` at the end of `fd` (the file `path`, `size_before` bytes long before), or the
// file cut back to that size and an error of `kind`: "<who> appending to <path> failed: <why>".
void append_whole(int fd, const std::string& path, std::string_view bytes, long long size_before, ErrorKind kind,
                  const std::string& who);
// `path` opened for appending, created if absent (with `fresh`, only a file that was not there);
// anything but a regular file is refused, never written into (a FIFO would block). Errors of `kind`.
int open_append(const std::string& path, bool fresh, ErrorKind kind, const std::string& who);

}  // namespace zt
