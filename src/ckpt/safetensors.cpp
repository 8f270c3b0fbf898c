#include "zt/ckpt/safetensors.h"

#include "safetensors_detail.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <tuple>

#include "zt/core/json_keys.h"
#include "zt/core/strings.h"

// Note [safetensors validation]
// Everything in a file is checked before it is trusted, and every failure is ErrorKind::checkpoint
// naming the file: the header length (at most kMaxHeader, as the reference implementation
// enforces), the JSON nesting (at most the format's three levels, checked by a scan before
// parsing, so no value is deep enough to overflow a recursive walk), duplicate keys (the parser
// would keep only the last), metadata (a flat string -> string map), each tensor's dtype, shape
// (non-negative integers whose product, in bytes, fits 64 bits) and data_offsets (inside the
// data section, the shape's size, and overlapping no other tensor). parse_safetensors and
// load_safetensors share all of it, so the fuzz target exercises what reads real files.

namespace zt::ckpt {

const char* safetensors_dtype_name(DType t) {
  switch (t) {
    case DType::f32:
      return "F32";
    case DType::bf16:
      return "BF16";
    case DType::f16:
      return "F16";
    case DType::i32:
      return "I32";
    case DType::i64:
      return "I64";
  }
  return "?";
}

namespace {

const char* st_dtype(DType t) { return safetensors_dtype_name(t); }

constexpr uint64_t kMaxHeader = 100'000'000;  // bytes, as in the reference implementation
constexpr int kMaxDepth = 3;                  // {name: {"shape": [...]}}

DType from_st_dtype(const std::string& s, const std::string& src, const std::string& name) {
  for (DType t : {DType::f32, DType::bf16, DType::f16, DType::i32, DType::i64})
    if (s == st_dtype(t)) return t;
  ZT_THROW_AS(ErrorKind::checkpoint, "[safetensors] ", src, ": tensor '", name, "' has unsupported dtype '",
              s.substr(0, 32), "' (supported: F32, BF16, F16, I32, I64)");
}

// A JSON value in a message: numbers as written, anything else by its type.
std::string describe(const nlohmann::json& v) {
  if (v.is_number()) return v.dump();
  return (v.is_object() || v.is_array() ? "an " : "a ") + std::string(v.type_name());
}

using Entry = SafetensorsEntry;  // offsets relative to the data section until returned

// The nesting depth is checked before parsing (core's scan: brackets outside strings).
void check_depth(const std::string& src, const std::string& h) {
  const size_t at = json_depth_exceeded_at(h, kMaxDepth);
  ZT_CHECK_AS(ErrorKind::checkpoint, at == std::string::npos, "[safetensors] ", src,
              ": the JSON header nests deeper than the format's ", kMaxDepth, " levels at byte offset ", 8 + at);
}

nlohmann::json parse_json(const std::string& src, const std::string& h) {
  check_depth(src, h);
  // Note [duplicate JSON keys]; a NUL would end a C reader's view of the header early.
  const size_t nul = h.find('\0');
  ZT_CHECK_AS(ErrorKind::checkpoint, nul == std::string::npos, "[safetensors] ", src,
              ": a NUL byte in the JSON header at byte ", 8 + nul);
  auto duplicate = [&](const std::string& k, const std::string&) {
    ZT_THROW_AS(ErrorKind::checkpoint, "[safetensors] ", src, ": duplicate key '", printable(k),
                "' in the JSON header");
  };
  try {
    return parse_unique_keys<nlohmann::json>(h, duplicate);
  } catch (const nlohmann::json::parse_error& e) {
    ZT_THROW_AS(ErrorKind::checkpoint, "[safetensors] ", src, ": malformed JSON header at byte ", 8 + e.byte, ": ",
                e.what());
  } catch (const nlohmann::json::exception& e) {  // e.g. out_of_range: a number beyond a double
    ZT_THROW_AS(ErrorKind::checkpoint, "[safetensors] ", src, ": malformed JSON header: ", e.what());
  }
}

// A non-negative integer that fits int64, or an error naming `what`.
int64_t non_negative(const nlohmann::json& v, const std::string& src, const std::string& what) {
  ZT_CHECK_AS(ErrorKind::checkpoint,
              v.is_number_integer() && (v.is_number_unsigned() || v.get<int64_t>() >= 0) &&
                  v.get<uint64_t>() <= uint64_t(INT64_MAX),
              "[safetensors] ", src, ": ", what, " is ", describe(v), ", not a non-negative integer");
  return v.get<int64_t>();
}

Entry parse_entry(const std::string& src, const std::string& name, const nlohmann::json& v, uint64_t data_size) {
  const std::string where = "tensor '" + name + "'";
  ZT_CHECK_AS(ErrorKind::checkpoint, v.is_object(), "[safetensors] ", src, ": ", where, " is ", describe(v),
              ", not an object");
  for (const char* field : {"dtype", "shape", "data_offsets"})
    ZT_CHECK_AS(ErrorKind::checkpoint, v.contains(field), "[safetensors] ", src, ": ", where, " has no '", field, "'");
  const auto& dt = v["dtype"];
  const auto& shape = v["shape"];
  const auto& offs = v["data_offsets"];
  ZT_CHECK_AS(ErrorKind::checkpoint, dt.is_string(), "[safetensors] ", src, ": ", where, ": dtype is ", describe(dt),
              ", not a string");
  ZT_CHECK_AS(ErrorKind::checkpoint, shape.is_array(), "[safetensors] ", src, ": ", where, ": shape is ",
              describe(shape), ", not an array");
  ZT_CHECK_AS(ErrorKind::checkpoint, offs.is_array() && offs.size() == 2, "[safetensors] ", src, ": ", where,
              ": data_offsets must be an array [begin, end]");
  Entry e{name, from_st_dtype(dt.get<std::string>(), src, name), {}, 0, 0};
  // The product of the non-zero dims, so that every partial product (strides too) fits as well.
  uint64_t bytes = dtype_size(e.dtype);
  bool empty = false;
  for (size_t d = 0; d < shape.size(); ++d) {
    e.shape.push_back(non_negative(shape[d], src, where + ": shape entry " + std::to_string(d)));
    empty = empty || e.shape.back() == 0;
    ZT_CHECK_AS(ErrorKind::checkpoint,
                e.shape.back() == 0 ||
                    (!__builtin_mul_overflow(bytes, uint64_t(e.shape.back()), &bytes) && bytes <= uint64_t(INT64_MAX)),
                "[safetensors] ", src, ": ", where, ": the shape's size in bytes overflows 63 bits at entry ", d);
  }
  if (empty) bytes = 0;
  e.begin = uint64_t(non_negative(offs[0], src, where + ": data_offsets[0]"));
  e.end = uint64_t(non_negative(offs[1], src, where + ": data_offsets[1]"));
  ZT_CHECK_AS(ErrorKind::checkpoint, e.begin <= e.end && e.end <= data_size, "[safetensors] ", src, ": ", where,
              " data_offsets [", e.begin, ", ", e.end, "] out of range (data section is ", data_size, " bytes)");
  ZT_CHECK_AS(ErrorKind::checkpoint, e.end - e.begin == bytes, "[safetensors] ", src, ": ", where, " has ",
              e.end - e.begin, " bytes but shape ", shape_str(e.shape), " needs ", bytes);
  return e;
}

// The header's tensors in file order, checked against a data section of data_size bytes.
std::vector<Entry> parse_header(const std::string& src, const std::string& h, uint64_t data_size,
                                std::map<std::string, std::string>& metadata) {
  const nlohmann::json header = parse_json(src, h);
  ZT_CHECK_AS(ErrorKind::checkpoint, header.is_object(), "[safetensors] ", src,
              ": the JSON header must be an object, got ", header.type_name());
  std::vector<Entry> entries;
  for (auto& [name, v] : header.items()) {
    if (name != "__metadata__") {
      entries.push_back(parse_entry(src, name, v, data_size));
      continue;
    }
    ZT_CHECK_AS(ErrorKind::checkpoint, v.is_object(), "[safetensors] ", src, ": __metadata__ is ", describe(v),
                ", not an object of strings");
    for (auto& [k, m] : v.items()) {
      ZT_CHECK_AS(ErrorKind::checkpoint, m.is_string(), "[safetensors] ", src, ": __metadata__ '", k.substr(0, 64),
                  "' is ", describe(m), "; metadata values must be strings");
      metadata[k] = m.get<std::string>();
    }
  }
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return std::tie(a.begin, a.end) < std::tie(b.begin, b.end); });
  for (size_t i = 1; i < entries.size(); ++i) {
    const Entry &a = entries[i - 1], &b = entries[i];
    ZT_CHECK_AS(ErrorKind::checkpoint, b.begin >= a.end, "[safetensors] ", src, ": tensors '", a.name, "' [", a.begin,
                ", ", a.end, ") and '", b.name, "' [", b.begin, ", ", b.end, ") overlap in the data section");
  }
  return entries;
}

uint64_t header_length(const std::string& src, const uint8_t* first8, uint64_t size) {
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = n << 8 | first8[i];  // little-endian
  ZT_CHECK_AS(ErrorKind::checkpoint, n <= size - 8, "[safetensors] ", src, ": header length ", n,
              " at byte 0 exceeds the file size ", size);
  ZT_CHECK_AS(ErrorKind::checkpoint, n <= kMaxHeader, "[safetensors] ", src, ": header length ", n,
              " at byte 0 exceeds the format's limit of ", kMaxHeader, " bytes");
  return n;
}

// Reads exactly n bytes at `off`, or says what was short.
void read_at(int fd, void* dst, uint64_t n, uint64_t off, const std::string& src, const std::string& what) {
  auto* p = static_cast<char*>(dst);
  while (n > 0) {
    const ssize_t r = ::pread(fd, p, size_t(std::min<uint64_t>(n, 1u << 30)), off_t(off));
    if (r < 0 && errno == EINTR) continue;
    ZT_CHECK_AS(ErrorKind::checkpoint, r > 0, "[safetensors] ", src, ": short read of ", what, " at byte ", off,
                r < 0 ? std::string(": ") + std::strerror(errno) : std::string(" (the file shrank)"));
    p += r, n -= uint64_t(r), off += uint64_t(r);
  }
}

struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  Fd(Fd&& o) noexcept : fd(o.fd) { o.fd = -1; }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

std::string detail::encode_safetensors_header(const nlohmann::json& header) {
  std::string h = header.dump();
  h.append((8 - h.size() % 8) % 8, ' ');
  const uint64_t n = h.size();
  return std::string(reinterpret_cast<const char*>(&n), 8) + h;
}

SafetensorsWriter::SafetensorsWriter(AtomicFile& out, std::vector<TensorEntry> entries,
                                     const std::map<std::string, std::string>& metadata)
    : out_(out), entries_(std::move(entries)) {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  size_t off = 0;
  for (auto& e : entries_) {
    const size_t bytes = size_t(shape_numel(e.shape)) * dtype_size(e.dtype);
    header[e.name] = {{"dtype", st_dtype(e.dtype)}, {"shape", e.shape}, {"data_offsets", {off, off + bytes}}};
    off += bytes;
  }
  out_.write(detail::encode_safetensors_header(header));
}

void SafetensorsWriter::write(const std::string& name, const Tensor& t) {
  ZT_CHECK(next_ < entries_.size(), "[safetensors] ", out_.path(), ": tensor '", name, "' beyond the header's ",
           entries_.size());
  const TensorEntry& e = entries_[next_++];
  ZT_CHECK(e.name == name && e.dtype == t.dtype() && e.shape == t.shape(), "[safetensors] ", out_.path(), ": tensor '",
           name, "' ", dtype_name(t.dtype()), " ", shape_str(t.shape()), " where the header has '", e.name, "' ",
           dtype_name(e.dtype), " ", shape_str(e.shape));
  Tensor c = t.contiguous();
  out_.write(c.raw_data(), c.nbytes());
}

void SafetensorsWriter::finish() const {
  ZT_CHECK(next_ == entries_.size(), "[safetensors] ", out_.path(), ": ", next_, " of ", entries_.size(),
           " tensors written");
}

void write_safetensors(AtomicFile& out, const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::vector<TensorEntry> entries;
  for (auto& [name, t] : tensors) entries.push_back({name, t.dtype(), t.shape()});
  SafetensorsWriter w(out, std::move(entries), metadata);
  for (auto& [name, t] : tensors) w.write(name, t);
  w.finish();
}

void save_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  AtomicFile f(path, ErrorKind::checkpoint, "[safetensors]");
  write_safetensors(f, tensors, metadata);
  f.commit();
  sync_dir(folder_of(path), ErrorKind::checkpoint, "[safetensors]");
}

const Tensor* LoadedTensors::find(const std::string& name) const {
  for (auto& [n, t] : tensors)
    if (n == name) return &t;
  return nullptr;
}

const Tensor& LoadedTensors::weight(const std::string& name, const Shape& shape) const {
  const Tensor* t = find(name);
  ZT_CHECK_AS(ErrorKind::checkpoint, t, "[safetensors] ", source, " has no tensor '", name,
              "' (the config's model does not match)");
  ZT_CHECK_AS(ErrorKind::checkpoint, is_floating(t->dtype()), "[safetensors] ", source, ": tensor '", name,
              "' has dtype ", st_dtype(t->dtype()), "; weights must be F32, BF16 or F16");
  ZT_CHECK_AS(ErrorKind::checkpoint, t->shape() == shape, "[safetensors] ", source, ": tensor '", name, "' has shape ",
              shape_str(t->shape()), ", the model expects ", shape_str(shape));
  return *t;
}

namespace {
// Opens a regular file (refusing anything else before it can block) and parses its header.
struct OpenedFile {
  Fd f{-1};
  SafetensorsHeader header;
};
OpenedFile open_safetensors(const std::string& path) {
  struct stat st {};
  ZT_CHECK_AS(ErrorKind::checkpoint, ::stat(path.c_str(), &st) == 0, "[safetensors] cannot open ", path, ": ",
              std::strerror(errno));
  ZT_CHECK_AS(ErrorKind::checkpoint, S_ISREG(st.st_mode), "[safetensors] ", path, " is ", file_type_name(st.st_mode),
              ", not a regular file");
  // Non-blocking, so a FIFO swapped in after the stat cannot block the open; fstat decides.
  OpenedFile o{Fd{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK)}, {}};
  ZT_CHECK_AS(ErrorKind::checkpoint, o.f.fd >= 0, "[safetensors] cannot open ", path, ": ", std::strerror(errno));
  ZT_CHECK_AS(ErrorKind::checkpoint, ::fstat(o.f.fd, &st) == 0 && S_ISREG(st.st_mode), "[safetensors] ", path, " is ",
              file_type_name(st.st_mode), ", not a regular file");
  const uint64_t size = uint64_t(st.st_size);
  ZT_CHECK_AS(ErrorKind::checkpoint, size >= 8, "[safetensors] ", path, ": file of ", size,
              " bytes is too short for the 8-byte header length");
  uint8_t first8[8];
  read_at(o.f.fd, first8, 8, 0, path, "the header length");
  const uint64_t n = header_length(path, first8, size);
  std::string h(n, '\0');
  read_at(o.f.fd, h.data(), n, 8, path, "the header");
  o.header.source = path;
  o.header.tensors = parse_header(path, h, size - 8 - n, o.header.metadata);
  for (auto& e : o.header.tensors) e.begin += 8 + n, e.end += 8 + n;
  return o;
}
}  // namespace

SafetensorsHeader read_safetensors_header(const std::string& path) { return open_safetensors(path).header; }

LoadedTensors load_safetensors(const std::string& path) {
  const OpenedFile o = open_safetensors(path);
  LoadedTensors out;
  out.source = path;
  out.metadata = o.header.metadata;
  for (const Entry& e : o.header.tensors) {
    Tensor t = Tensor::empty(e.shape, e.dtype);
    read_at(o.f.fd, t.raw_data(), e.end - e.begin, e.begin, path, "tensor '" + e.name + "'");
    out.tensors.emplace_back(e.name, t);
  }
  return out;
}

LoadedTensors parse_safetensors(const void* data, size_t size, const std::string& name) {
  const auto* bytes = static_cast<const uint8_t*>(data);
  ZT_CHECK_AS(ErrorKind::checkpoint, size >= 8, "[safetensors] ", name, ": file of ", size,
              " bytes is too short for the 8-byte header length");
  const uint64_t n = header_length(name, bytes, size);
  LoadedTensors out;
  out.source = name;
  const std::string h(reinterpret_cast<const char*>(bytes) + 8, n);
  for (const Entry& e : parse_header(name, h, size - 8 - n, out.metadata)) {
    Tensor t = Tensor::empty(e.shape, e.dtype);
    if (e.end > e.begin) std::memcpy(t.raw_data(), bytes + 8 + n + e.begin, e.end - e.begin);
    out.tensors.emplace_back(e.name, t);
  }
  return out;
}

}  // namespace zt::ckpt
