// IDX reader. Raw and gzip files both go through zlib's gzread, which passes plain files
// through unchanged, so there is one code path and one set of error messages.
#include <zlib.h>

#include <filesystem>
#include <sstream>

#include "zt/core/error.h"
#include "zt/data/mnist.h"

namespace zt::data {
namespace {

constexpr uint32_t kMagicLabels = 0x00000801;  // uint8 payload, 1 dim
constexpr uint32_t kMagicImages = 0x00000803;  // uint8 payload, 3 dims

std::string resolve_path(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) return path;
  if (fs::is_regular_file(path + ".gz", ec)) return path + ".gz";
  ZT_THROW_AS(ErrorKind::data, "[data] ", path, ": no such file (also tried ", path, ".gz)");
}

// Whole (decompressed) file contents.
std::vector<uint8_t> read_all(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  ZT_CHECK_AS(ErrorKind::data, f != nullptr, "[data] ", path, ": cannot open for reading");
  std::vector<uint8_t> out;
  constexpr unsigned kChunk = 1u << 20;
  for (;;) {
    size_t old = out.size();
    out.resize(old + kChunk);
    int got = gzread(f, out.data() + old, kChunk);
    if (got < 0) {
      int code = 0;
      std::string msg = gzerror(f, &code);
      gzclose(f);
      ZT_THROW_AS(ErrorKind::data, "[data] ", path, ": read error after ", old, " bytes: ", msg);
    }
    out.resize(old + size_t(got));
    if (got == 0) break;
  }
  int code = 0;
  const char* msg = gzerror(f, &code);
  std::string err = (code != Z_OK && code != Z_STREAM_END) ? msg : "";
  gzclose(f);
  ZT_CHECK_AS(ErrorKind::data, err.empty(), "[data] ", path, ": corrupt gzip stream after ", out.size(),
              " decompressed bytes: ", err);
  return out;
}

uint32_t be32(const std::vector<uint8_t>& b, size_t off) {
  return uint32_t(b[off]) << 24 | uint32_t(b[off + 1]) << 16 | uint32_t(b[off + 2]) << 8 |
         uint32_t(b[off + 3]);
}

std::string hex32(uint32_t v) {
  std::ostringstream os;
  os << "0x" << std::hex;
  os.width(8);
  os.fill('0');
  os << v;
  return os.str();
}

}  // namespace

IdxArray read_idx(const std::string& requested) {
  const std::string path = resolve_path(requested);
  std::vector<uint8_t> bytes = read_all(path);
  const size_t have = bytes.size();
  const char* what = path.size() > 3 && path.ends_with(".gz") ? " decompressed bytes" : " bytes";

  ZT_CHECK_AS(ErrorKind::data, have >= 4, "[data] ", path, ": truncated: file has ", have, what,
              " but an IDX header needs at least 4");
  const uint32_t magic = be32(bytes, 0);
  ZT_CHECK_AS(ErrorKind::data, magic == kMagicLabels || magic == kMagicImages, "[data] ", path,
              ": bad IDX magic at byte offset 0: found ", hex32(magic), ", expected ", hex32(kMagicLabels),
              " (labels) or ", hex32(kMagicImages), " (images)");

  const size_t ndim = magic & 0xff;
  const size_t header = 4 + 4 * ndim;
  ZT_CHECK_AS(ErrorKind::data, have >= header, "[data] ", path, ": truncated: ", ndim, "-dim IDX header needs ", header,
              " bytes but file has ", have, what);

  IdxArray out;
  int64_t items = 1;
  for (size_t d = 0; d < ndim; ++d) {
    uint32_t v = be32(bytes, 4 + 4 * d);
    ZT_CHECK_AS(ErrorKind::data, d == 0 || v > 0, "[data] ", path, ": dimension ", d, " at byte offset ", 4 + 4 * d,
                " is 0");
    out.dims.push_back(int64_t(v));
    ZT_CHECK_AS(ErrorKind::data, !__builtin_mul_overflow(items, int64_t(v), &items), "[data] ", path,
                ": header dimensions overflow 64 bits");
  }
  const size_t expected = header + size_t(items);
  ZT_CHECK_AS(ErrorKind::data, have >= expected, "[data] ", path, ": truncated: header says ", out.dims[0],
              " items (expected ", expected, " bytes) but file has ", have, what);
  ZT_CHECK_AS(ErrorKind::data, have == expected, "[data] ", path, ": ", have - expected,
              " trailing bytes: header says ", out.dims[0], " items (expected ", expected, " bytes) but file has ",
              have, what);

  bytes.erase(bytes.begin(), bytes.begin() + std::ptrdiff_t(header));
  out.bytes = std::move(bytes);
  return out;
}

}  // namespace zt::data
