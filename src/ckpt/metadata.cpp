// Note [checkpoint metadata validation]: metadata.json is outside input (a file anyone can
// edit), so read_metadata checks every field the loader, export, the tools and a resumed run
// (extra.step, ...) use, with its type and range, before any of them trusts it; whatever is
// wrong is ErrorKind::checkpoint naming the file and the field. Deep nesting is refused before
// parsing (walking it recurses).
//
// Note [metadata checksum]: the shard files are checksummed in metadata.json, but an edit of
// metadata.json itself that stays self-consistent (a shape, an offset, a counter) would pass
// every range check. So the file carries `metadata_xxh64`, the xxh64 of its own compact dump
// without that field, checked after the fields (so the fuzz target reaches every check).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "zt/ckpt/metadata.h"
#include "zt/core/atomic_file.h"
#include "zt/core/dtype.h"
#include "zt/core/error.h"
#include "zt/core/json_keys.h"
#include "zt/core/strings.h"

namespace zt::ckpt {

namespace fs = std::filesystem;
using nlohmann::json;

bool valid_tag(const std::string& tag) {
  if (tag.empty() || tag.size() > 128 || tag[0] == '.' || tag == "latest" || tag.find(".partial") != std::string::npos)
    return false;
  return std::all_of(tag.begin(), tag.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
           c == '-' || c == '+';
  });
}

void check_tag(const std::string& tag, const std::string& what) {
  ZT_CHECK_AS(ErrorKind::checkpoint, valid_tag(tag), "[ckpt] ", what, " '", printable(tag),
              "', which is not a checkpoint tag (1 to 128 letters, digits, '.', '_', '+' or '-', not starting with "
              "'.', not 'latest')");
}

std::string metadata_checksum(const json& m) {
  json body = m;
  if (body.is_object()) body.erase("metadata_xxh64");
  const std::string text = body.dump();
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", (unsigned long long)XXH64(text.data(), text.size(), 0));
  return buf;
}

std::string read_small_file(const std::string& path, size_t limit) {
  // O_NONBLOCK: a FIFO opens at once and is refused by fstat, instead of blocking the reader.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  ZT_CHECK_AS(ErrorKind::checkpoint, fd >= 0, "[ckpt] cannot open ", path, ": ", std::strerror(errno));
  struct stat st {};
  std::string text;
  std::string err;
  if (::fstat(fd, &st) != 0)
    err = std::strerror(errno);
  else if (!S_ISREG(st.st_mode))
    err = std::string("is ") + file_type_name(st.st_mode) + ", not a regular file";
  else if (uint64_t(st.st_size) > limit)
    err = "is " + std::to_string(st.st_size) + " bytes, more than the " + std::to_string(limit) + " it may have";
  else
    text.resize(size_t(st.st_size));
  for (size_t done = 0; err.empty() && done < text.size();) {
    const ssize_t n = ::read(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) err = n < 0 ? std::strerror(errno) : "shrank while it was read";
    done += size_t(std::max<ssize_t>(n, 0));
  }
  ::close(fd);
  ZT_CHECK_AS(ErrorKind::checkpoint, err.empty(), "[ckpt] ", path, " ", err);
  return text;
}

std::string shard_file_name(int rank) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "rank_%05d.bin", rank);
  return buf;
}

namespace {

constexpr int kMaxDepth = 80;
constexpr size_t kMaxMetadataBytes = size_t(1) << 30;  // a model of millions of parameters stays far below  // the
                                                       // run's config (64 levels at most) sits under extra.config

struct Checker {
  const std::string& file;

  [[noreturn]] void bad(const std::string& field, const std::string& what) const {
    ZT_THROW_AS(ErrorKind::checkpoint, "[ckpt] ", file, ": '", field, "' ", what);
  }
  const json& at(const json& obj, const std::string& key, const std::string& field) const {
    if (!obj.is_object() || !obj.contains(key)) bad(field, "is missing");
    return obj.at(key);
  }
  int64_t integer(const json& v, const std::string& field, int64_t lo, int64_t hi) const {
    if (!v.is_number_integer()) bad(field, "must be an integer");
    const int64_t x = v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX) ? INT64_MAX : v.get<int64_t>();
    if (x < lo || x > hi)
      bad(field, "is " + std::to_string(x) + ", outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    return x;
  }
  const std::string& string(const json& v, const std::string& field) const {
    if (!v.is_string()) bad(field, "must be a string");
    return v.get_ref<const std::string&>();
  }
  const json& array(const json& v, const std::string& field, size_t size = SIZE_MAX) const {
    if (!v.is_array()) bad(field, "must be an array");
    if (size != SIZE_MAX && v.size() != size) bad(field, "must have " + std::to_string(size) + " entries");
    return v;
  }
  DType dtype(const json& v, const std::string& field) const {
    const std::string& s = string(v, field);
    for (DType t : {DType::f32, DType::bf16, DType::f16})
      if (s == dtype_name(t)) return t;
    bad(field, "is '" + s.substr(0, 16) + "', not f32, bf16 or f16");
  }
};

void validate(const json& m, const std::string& file) {
  const Checker c{file};
  constexpr int64_t kBig = int64_t(1) << 50;
  if (c.integer(c.at(m, "format", "format"), "format", 1, kCheckpointFormat) != kCheckpointFormat)
    c.bad("format",
          "is 1: written by an earlier zerotrain whose metadata.json has no checksum of itself; export it "
          "with that version and import the weights");
  const int64_t world = c.integer(c.at(m, "world_size", "world_size"), "world_size", 1, 1 << 20);
  c.integer(c.at(m, "stage", "stage"), "stage", 0, 3);
  c.dtype(c.at(m, "dtype", "dtype"), "dtype");
  c.string(c.at(m, "optimizer", "optimizer"), "optimizer");
  const json& params = c.array(c.at(m, "params", "params"), "params");
  std::vector<int64_t> numel(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    const std::string f = "params[" + std::to_string(i) + "]";
    c.string(c.at(params[i], "name", f + ".name"), f + ".name");
    int64_t n = 1;
    for (const auto& d : c.array(c.at(params[i], "shape", f + ".shape"), f + ".shape"))
      if (__builtin_mul_overflow(n, c.integer(d, f + ".shape", 0, kBig), &n) || n > kBig)
        c.bad(f + ".shape", "is too large");
    numel[i] = n;
  }
  const json& buffers = c.array(c.at(m, "buffers", "buffers"), "buffers");
  std::vector<int> placed(params.size(), 0);
  std::vector<int64_t> per_rank(buffers.size());
  for (size_t b = 0; b < buffers.size(); ++b) {
    const std::string f = "buffers[" + std::to_string(b) + "]";
    const int64_t used = c.integer(c.at(buffers[b], "numel", f + ".numel"), f + ".numel", 0, kBig);
    const int64_t padded = c.integer(c.at(buffers[b], "padded", f + ".padded"), f + ".padded", used, kBig);
    if (padded % world) c.bad(f + ".padded", "is not divisible by world_size " + std::to_string(world));
    per_rank[b] = padded / world;
    for (const auto& s : c.array(c.at(buffers[b], "params", f + ".params"), f + ".params")) {
      c.array(s, f + ".params[]", 3);
      const int64_t i = c.integer(s[0], f + ".params[].index", 0, int64_t(params.size()) - 1);
      const int64_t off = c.integer(s[1], f + ".params[].offset", 0, used);
      const int64_t n = c.integer(s[2], f + ".params[].numel", 0, used - off);
      if (n != numel[size_t(i)]) c.bad(f + ".params[]", "gives parameter " + std::to_string(i) + " the wrong size");
      ++placed[size_t(i)];
    }
  }
  for (size_t i = 0; i < placed.size(); ++i)
    if (placed[i] != 1)
      c.bad("buffers", "place parameter " + std::to_string(i) + " " + std::to_string(placed[i]) + " times");
  const json& entries = c.at(m, "entries", "entries");
  if (!entries.is_object()) c.bad("entries", "must be an object");
  int64_t file_bytes = 0;
  for (const auto& [key, e] : entries.items()) {
    const std::string f = "entries." + key.substr(0, 32);
    size_t b = 0;
    if (key.size() < 3 || key[0] != 'b' || (b = std::strtoull(key.c_str() + 1, nullptr, 10)) >= buffers.size())
      c.bad(f, "names no saved buffer");
    const DType dt = c.dtype(c.at(e, "dtype", f + ".dtype"), f + ".dtype");
    const int64_t off = c.integer(c.at(e, "offset", f + ".offset"), f + ".offset", 0, kBig);
    c.integer(c.at(e, "numel", f + ".numel"), f + ".numel", per_rank[b], per_rank[b]);
    file_bytes = std::max(file_bytes, off + per_rank[b] * int64_t(dtype_size(dt)));
  }
  const json& shards = c.array(c.at(m, "shards", "shards"), "shards", size_t(world));
  for (int64_t r = 0; r < world; ++r) {
    const std::string f = "shards[" + std::to_string(r) + "]";
    if (c.string(c.at(shards[size_t(r)], "file", f + ".file"), f + ".file") != shard_file_name(int(r)))
      c.bad(f + ".file", "must be " + shard_file_name(int(r)));
    const std::string& sum = c.string(c.at(shards[size_t(r)], "xxh64", f + ".xxh64"), f + ".xxh64");
    if (sum.size() != 16 || sum.find_first_not_of("0123456789abcdef") != std::string::npos)
      c.bad(f + ".xxh64", "must be 16 hex digits");
    c.integer(c.at(shards[size_t(r)], "bytes", f + ".bytes"), f + ".bytes", file_bytes, file_bytes);
  }
  const json& counters = c.at(m, "counters", "counters");
  c.integer(c.at(counters, "optimizer_steps", "counters.optimizer_steps"), "counters.optimizer_steps", 0, kBig);
  if (counters.contains("loss_scaler")) {
    const json& s = counters["loss_scaler"];
    if (!c.at(s, "scale", "counters.loss_scaler.scale").is_number())
      c.bad("counters.loss_scaler.scale", "must be a number");
    const double scale = c.at(s, "scale", "counters.loss_scaler.scale").get<double>();
    if (!std::isfinite(scale) || scale <= 0) c.bad("counters.loss_scaler.scale", "must be a positive finite number");
    for (const char* k : {"cur_hysteresis", "last_overflow_iter", "cur_iter", "skipped_steps"})
      c.integer(c.at(s, k, std::string("counters.loss_scaler.") + k), std::string("counters.loss_scaler.") + k, -1,
                kBig);
  }
  const std::string& tag = c.string(c.at(m, "tag", "tag"), "tag");
  if (!valid_tag(tag)) c.bad("tag", "is '" + printable(tag) + "', not a checkpoint tag");
  const int64_t step = c.integer(c.at(m, "step", "step"), "step", 0, kBig);
  // The run's own state, as train reads it on resume: the data position is extra.step.
  const json& extra = c.at(m, "extra", "extra");
  if (!extra.is_object()) c.bad("extra", "must be an object");
  if (extra.contains("step") && c.integer(extra["step"], "extra.step", 0, kBig) != step)
    c.bad("extra.step", "differs from 'step' " + std::to_string(step));
  if (extra.contains("train_batch_size")) c.integer(extra["train_batch_size"], "extra.train_batch_size", 1, kBig);
  if (extra.contains("skipped_steps")) c.integer(extra["skipped_steps"], "extra.skipped_steps", 0, step);
  const std::string& sum = c.string(c.at(m, "metadata_xxh64", "metadata_xxh64"), "metadata_xxh64");
  if (sum != metadata_checksum(m))
    c.bad("metadata_xxh64", "does not match the file's contents (" + metadata_checksum(m) +
                                "): metadata.json was changed after it was saved");
}

}  // namespace

json parse_metadata(const std::string& text, const std::string& file) {
  const size_t deep = json_depth_exceeded_at(text, kMaxDepth);
  ZT_CHECK_AS(ErrorKind::checkpoint, deep == std::string::npos, "[ckpt] ", file, ": nesting deeper than ", kMaxDepth,
              " levels at byte ", deep);
  const size_t nul = text.find('\0');
  ZT_CHECK_AS(ErrorKind::checkpoint, nul == std::string::npos, "[ckpt] ", file, ": a NUL byte at byte ", nul);
  // Note [duplicate JSON keys]: a second "step" must not hide behind the first.
  const json m = parse_unique_keys<json>(
      text,
      [&](const std::string& key, const std::string& where) {
        ZT_THROW_AS(ErrorKind::checkpoint, "[ckpt] ", file, ": duplicate key '", printable(key), "' in ",
                    where.empty() ? std::string("the top-level object") : "'" + printable(where) + "'");
      },
      /*allow_exceptions=*/false);
  ZT_CHECK_AS(ErrorKind::checkpoint, !m.is_discarded() && m.is_object(), "[ckpt] ", file, " is not a JSON object");
  validate(m, file);
  return m;
}

json read_metadata(const std::string& path) {
  const fs::path p = fs::path(path) / "metadata.json";
  std::error_code ec;
  ZT_CHECK_AS(ErrorKind::checkpoint, fs::exists(fs::symlink_status(p, ec)), "[ckpt] ", p.string(),
              " does not exist (not a checkpoint folder)");
  return parse_metadata(read_small_file(p.string(), kMaxMetadataBytes), p.string());
}

}  // namespace zt::ckpt
