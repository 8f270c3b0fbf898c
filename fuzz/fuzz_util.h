#pragma once
// Shared by the fuzz targets: the parsers under test read files, so each input is written to one
// scratch file per process (on tmpfs when there is one) and read back.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace zt::fuzz {

// A folder of this process's own under $ZT_FUZZ_SCRATCH (scripts/fuzz.sh removes that one after
// a run, as crashed processes leave theirs), else /dev/shm; removed at a normal exit (the name is
// never destroyed, so the exit handler can still read it).
inline const std::string& scratch_dir() {
  static const std::string* dir = [] {
    namespace fs = std::filesystem;
    const char* env = std::getenv("ZT_FUZZ_SCRATCH");
    const fs::path base = env && *env                    ? fs::path(env)
                          : fs::is_directory("/dev/shm") ? fs::path("/dev/shm")
                                                         : fs::temp_directory_path();
    auto* d = new std::string((base / ("zt_fuzz_" + std::to_string(getpid()))).string());
    fs::create_directories(*d);
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(scratch_dir(), ec);
    });
    return d;
  }();
  return *dir;
}

// Writes `size` bytes to `name` in the scratch folder; returns its path.
inline std::string write_scratch(const std::string& name, const uint8_t* data, size_t size) {
  const std::string path = scratch_dir() + "/" + name;
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f || (size && std::fwrite(data, 1, size, f) != size) || std::fclose(f) != 0) std::abort();
  return path;
}

}  // namespace zt::fuzz
