// IDX reader over files and memory, raw or gzip (Note [bounded IDX reads]).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <sstream>

#include "idx_reader.h"
#include "zt/core/atomic_file.h"
#include "zt/core/error.h"

// Note [bounded IDX reads]
// A gzip file can inflate a thousandfold, so nothing is decoded before the header has been read
// and checked, and then never more than the header promises: the payload is read with exactly
// its size into a buffer that grows (at most doubling) only as bytes arrive, so a short file
// claiming a large payload costs little, and trailing data is detected by decoding at most
// kTrailProbe more bytes. A raw file's size is known from fstat, so a truncated or padded raw
// file is rejected before its payload is read. The input is gzip when it starts with the gzip
// magic (1f 8b); concatenated gzip members are read as one stream, and anything else after the
// last member is an error. Files and memory share the decoder, so the fuzz targets (parse_idx)
// exercise the code that reads real files.

namespace zt::data {
namespace detail {
namespace {

constexpr uint32_t kMagicLabels = 0x00000801;  // uint8 payload, 1 dim
constexpr uint32_t kMagicImages = 0x00000803;  // uint8 payload, 3 dims
constexpr size_t kInputChunk = 64u << 10;      // compressed (or raw) bytes read per system call
constexpr size_t kInitialReserve = 1u << 20;   // the most reserved before bytes have arrived
constexpr size_t kTrailProbe = 64u << 10;      // the most decoded past the payload

uint32_t be32(const uint8_t* b) {
  return uint32_t(b[0]) << 24 | uint32_t(b[1]) << 16 | uint32_t(b[2]) << 8 | uint32_t(b[3]);
}

std::string hex32(uint32_t v) {
  std::ostringstream os;
  os << "0x" << std::hex;
  os.width(8);
  os.fill('0');
  os << v;
  return os.str();
}

// `path` if it exists, else `path`.gz; either must be a regular file (a FIFO would block in open).
std::string resolve_path(const std::string& path) {
  for (const std::string& p : {path, path + ".gz"}) {
    struct stat st {};
    if (::stat(p.c_str(), &st) != 0) {
      // Only a missing file falls through to the .gz; a folder it cannot search is said as such.
      ZT_CHECK_AS(ErrorKind::data, errno == ENOENT, "[data] ", p, ": ", std::strerror(errno),
                  errno == EACCES ? " (a folder on the way cannot be searched or the file read by this user)" : "");
      continue;
    }
    ZT_CHECK_AS(ErrorKind::data, S_ISREG(st.st_mode), "[data] ", p, " is ", file_type_name(st.st_mode),
                ", not a regular file");
    return p;
  }
  ZT_THROW_AS(ErrorKind::data, "[data] ", path, ": no such file (also tried ", path, ".gz)");
}

}  // namespace

struct IdxReader::Impl {
  std::string name;
  int fd = -1;                  // file input, or -1 for memory
  std::vector<uint8_t> buf;     // file input buffer
  const uint8_t* in = nullptr;  // undecoded input
  size_t in_avail = 0;
  bool in_eof = false;
  bool gzip = false, z_init = false, member_end = false;
  z_stream zs{};
  uint64_t raw_total = 0;  // raw input: its size
  uint64_t decoded = 0;    // bytes delivered by read_some
  std::vector<int64_t> dims;
  uint64_t header = 0, payload = 0;

  ~Impl() {
    if (z_init) inflateEnd(&zs);
    if (fd >= 0) ::close(fd);
  }
  const char* unit() const { return gzip ? " decompressed bytes" : " bytes"; }

  // Appends file input after what is left undecoded; false at the end of the input.
  bool refill() {
    if (in_eof) return false;
    if (buf.empty()) buf.resize(kInputChunk);
    if (in_avail > 0) std::memmove(buf.data(), in, in_avail);
    in = buf.data();
    if (in_avail == buf.size()) return true;
    ssize_t r;
    do r = ::read(fd, buf.data() + in_avail, buf.size() - in_avail);
    while (r < 0 && errno == EINTR);
    ZT_CHECK_AS(ErrorKind::data, r >= 0, "[data] ", name, ": read error: ", std::strerror(errno));
    in_avail += size_t(r);
    in_eof = r == 0;
    return r > 0;
  }

  // Decides raw or gzip from the first two bytes.
  void start() {
    while (in_avail < 2 && refill()) {
    }
    gzip = in_avail >= 2 && in[0] == 0x1f && in[1] == 0x8b;
    if (gzip) {
      ZT_CHECK_AS(ErrorKind::out_of_memory, inflateInit2(&zs, 16 + MAX_WBITS) == Z_OK, "[data] ", name,
                  ": cannot start zlib");
      z_init = true;
    }
  }

  // Decodes up to n bytes into dst; fewer only at the end of the data.
  size_t read_some(uint8_t* dst, size_t n) {
    size_t got = 0;
    while (got < n) {
      if (in_avail == 0 && !refill()) {
        ZT_CHECK_AS(ErrorKind::data, !gzip || member_end, "[data] ", name, ": the gzip stream is cut off after ",
                    decoded + got, " decompressed bytes (the compressed file is truncated)");
        break;
      }
      if (!gzip) {
        const size_t k = std::min(n - got, in_avail);
        std::memcpy(dst + got, in, k);
        in += k, in_avail -= k, got += k;
        continue;
      }
      if (member_end) {  // another gzip member, or the end of the file
        while (in_avail < 2 && refill()) {
        }
        ZT_CHECK_AS(ErrorKind::data, in_avail >= 2 && in[0] == 0x1f && in[1] == 0x8b, "[data] ", name,
                    ": unexpected bytes after the gzip stream (after ", decoded + got,
                    " decompressed bytes; neither another gzip member nor the end of the file)");
        ZT_CHECK_AS(ErrorKind::internal, inflateReset(&zs) == Z_OK, "[data] ", name, ": inflateReset failed");
        member_end = false;
      }
      const uInt give_in = uInt(std::min<size_t>(in_avail, UINT_MAX));
      const uInt give_out = uInt(std::min<size_t>(n - got, UINT_MAX));
      zs.next_in = const_cast<Bytef*>(in);
      zs.avail_in = give_in;
      zs.next_out = dst + got;
      zs.avail_out = give_out;
      const int rc = inflate(&zs, Z_NO_FLUSH);
      in += give_in - zs.avail_in, in_avail -= give_in - zs.avail_in;
      got += give_out - zs.avail_out;
      if (rc == Z_STREAM_END)
        member_end = true;
      else if (rc == Z_BUF_ERROR && in_avail == 0)
        continue;  // needs more input
      else
        ZT_CHECK_AS(ErrorKind::data, rc == Z_OK, "[data] ", name, ": corrupt gzip stream at decompressed byte offset ",
                    decoded + got, ": ", zs.msg ? zs.msg : zError(rc));
    }
    decoded += got;
    return got;
  }

  // Reads and checks the magic and the dimensions; nothing after them.
  void read_header() {
    start();
    uint8_t b[4 + 4 * 3];
    size_t have = read_some(b, 4);
    ZT_CHECK_AS(ErrorKind::data, have == 4, "[data] ", name, ": truncated: file has ", have, unit(),
                " but an IDX header needs at least 4");
    const uint32_t magic = be32(b);
    ZT_CHECK_AS(ErrorKind::data, magic == kMagicLabels || magic == kMagicImages, "[data] ", name,
                ": bad IDX magic at byte offset 0: found ", hex32(magic), ", expected ", hex32(kMagicLabels),
                " (labels) or ", hex32(kMagicImages), " (images)");
    const size_t ndim = magic & 0xff;
    header = 4 + 4 * ndim;
    have += read_some(b + 4, 4 * ndim);
    ZT_CHECK_AS(ErrorKind::data, have == header, "[data] ", name, ": truncated: ", ndim, "-dim IDX header needs ",
                header, " bytes but file has ", have, unit());
    uint64_t items = 1;
    for (size_t d = 0; d < ndim; ++d) {
      const uint32_t v = be32(b + 4 + 4 * d);
      ZT_CHECK_AS(ErrorKind::data, d == 0 || v > 0, "[data] ", name, ": dimension ", d, " at byte offset ", 4 + 4 * d,
                  " is 0");
      dims.push_back(int64_t(v));
      ZT_CHECK_AS(ErrorKind::data, !__builtin_mul_overflow(items, uint64_t(v), &items) && items <= uint64_t(INT64_MAX),
                  "[data] ", name, ": header dimensions overflow 64 bits");
    }
    payload = items;
    if (!gzip) check_size(raw_total);  // known without reading the payload
  }

  // `have` decoded bytes in all: exactly what the header says, or an error with both.
  void check_size(uint64_t have, bool at_least = false) const {
    const uint64_t expected = header + payload;
    ZT_CHECK_AS(ErrorKind::data, have >= expected, "[data] ", name, ": truncated at byte offset ", have,
                ": header says ", dims[0], " items (expected ", expected, " bytes) but file has ", have, unit());
    ZT_CHECK_AS(ErrorKind::data, have == expected, "[data] ", name, ": ", at_least ? "at least " : "", have - expected,
                " trailing bytes at byte offset ", expected, ": header says ", dims[0], " items (expected ", expected,
                " bytes) but file has ", at_least ? "at least " : "", have, unit());
  }
};

IdxReader::IdxReader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) { impl_->read_header(); }
IdxReader::IdxReader(IdxReader&&) noexcept = default;
IdxReader::~IdxReader() = default;

IdxReader IdxReader::open(const std::string& requested) {
  auto impl = std::make_unique<Impl>();
  impl->name = resolve_path(requested);
  // Non-blocking, so a FIFO swapped in after the stat cannot block the open; fstat decides.
  impl->fd = ::open(impl->name.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  ZT_CHECK_AS(ErrorKind::data, impl->fd >= 0, "[data] ", impl->name,
              ": cannot open for reading: ", std::strerror(errno));
  struct stat st {};
  ZT_CHECK_AS(ErrorKind::data, ::fstat(impl->fd, &st) == 0 && S_ISREG(st.st_mode), "[data] ", impl->name, " is ",
              file_type_name(st.st_mode), ", not a regular file");
  impl->raw_total = uint64_t(st.st_size);
  return IdxReader(std::move(impl));
}

IdxReader::IdxReader(const void* data, size_t size, std::string name) {
  auto impl = std::make_unique<Impl>();
  impl->name = std::move(name);
  impl->in = static_cast<const uint8_t*>(data);
  impl->in_avail = size;
  impl->in_eof = true;
  impl->raw_total = size;
  impl_ = std::move(impl);
  impl_->read_header();
}

const std::string& IdxReader::name() const { return impl_->name; }
const std::vector<int64_t>& IdxReader::dims() const { return impl_->dims; }
uint64_t IdxReader::header_bytes() const { return impl_->header; }
uint64_t IdxReader::payload_bytes() const { return impl_->payload; }

IdxArray IdxReader::read() {
  Impl& r = *impl_;
  IdxArray out;
  out.dims = r.dims;
  std::vector<uint8_t>& b = out.bytes;
  b.reserve(r.gzip ? std::min<uint64_t>(r.payload, kInitialReserve) : r.payload);  // raw: size already checked
  while (b.size() < r.payload) {
    const size_t old = b.size();
    if (old == b.capacity()) b.reserve(size_t(std::min<uint64_t>(r.payload, 2 * old)));
    const size_t step = size_t(std::min<uint64_t>(r.payload, b.capacity()) - old);
    b.resize(old + step);
    const size_t got = r.read_some(b.data() + old, step);
    b.resize(old + got);
    if (got < step) break;
  }
  if (b.size() < r.payload) r.check_size(r.decoded);
  std::vector<uint8_t> probe(kTrailProbe);
  const size_t extra = r.read_some(probe.data(), probe.size());
  if (extra > 0) r.check_size(r.decoded, extra == probe.size());
  return out;
}

}  // namespace detail

IdxArray read_idx(const std::string& path) { return detail::IdxReader::open(path).read(); }

IdxArray parse_idx(const void* data, size_t size, const std::string& name) {
  return detail::IdxReader(data, size, name).read();
}

}  // namespace zt::data
