// Token shards mapped and read as one sequence (Note [mapped token shards] in token_stream.h).
#include "zt/data/token_stream.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "input_file.h"
#include "zt/core/error.h"
#include "zt/data/token_shard.h"

namespace zt::data {

struct TokenStream::Part {
  std::string name;
  const uint8_t* data = nullptr;  // the first token
  int64_t count = 0;
  size_t width = 2;             // bytes a token
  uint8_t* map_base = nullptr;  // a mapped part's whole file, for madvise
  size_t map_bytes = 0;
  std::shared_ptr<const void> owner;  // the mapping or the vector

  size_t offset(int64_t i) const { return kTokenShardHeaderBytes + size_t(i) * width; }  // token i's, in the file
};

namespace {

// Tokens [at, at + n) of a part, widened into out.
template <typename T>
void widen(const uint8_t* data, size_t width, int64_t at, int64_t n, T* out) {
  if (width == 2) {
    const uint16_t* src = reinterpret_cast<const uint16_t*>(data) + at;
    for (int64_t i = 0; i < n; ++i) out[i] = T(src[i]);
  } else {
    const uint32_t* src = reinterpret_cast<const uint32_t*>(data) + at;
    for (int64_t i = 0; i < n; ++i) out[i] = T(src[i]);
  }
}

// madvise of a whole mapping (advice only: a failure changes no result).
void advise(uint8_t* base, size_t bytes, int advice) { ::madvise(base, bytes, advice); }

// Unmaps the pages around file bytes [begin, end) of a mapping (they stay in the page cache).
// A fault maps the whole page-cache folio around a page (up to 2 MiB, aligned in the file), so
// dropping the read pages alone would leave the rest of each folio resident: round out to 2 MiB.
void drop(uint8_t* base, size_t bytes, size_t begin, size_t end) {
  constexpr size_t kFolio = size_t(2) << 20;
  static const size_t page = size_t(::sysconf(_SC_PAGESIZE));
  const size_t lo = begin / kFolio * kFolio,
               hi = std::min((end + kFolio - 1) / kFolio * kFolio, (bytes + page - 1) / page * page);
  ::madvise(base + lo, hi - lo, MADV_DONTNEED);
}

}  // namespace

TokenStream::TokenStream(std::vector<uint16_t> tokens, std::string name) {
  auto held = std::make_shared<const std::vector<uint16_t>>(std::move(tokens));
  add(std::make_shared<const Part>(Part{std::move(name), reinterpret_cast<const uint8_t*>(held->data()),
                                        int64_t(held->size()), 2, nullptr, 0, held}));
}

TokenStream::TokenStream(std::vector<uint32_t> tokens, std::string name) {
  auto held = std::make_shared<const std::vector<uint32_t>>(std::move(tokens));
  add(std::make_shared<const Part>(Part{std::move(name), reinterpret_cast<const uint8_t*>(held->data()),
                                        int64_t(held->size()), 4, nullptr, 0, held}));
}

TokenStream TokenStream::map_files(const std::vector<std::string>& paths) {
  TokenStream s;
  for (const std::string& path : paths) {
    detail::InputFile f(path);
    uint8_t header[kTokenShardHeaderBytes] = {};
    f.read_at(header, size_t(std::min<uint64_t>(f.size(), sizeof header)), 0);
    const TokenShardHeader h = check_token_shard_header(header, f.size(), path);
    if (h.count == 0) continue;  // nothing to map (and mmap refuses nothing)
    void* base = ::mmap(nullptr, size_t(f.size()), PROT_READ, MAP_SHARED, f.fd(), 0);
    ZT_CHECK_AS(ErrorKind::data, base != MAP_FAILED, "[data] ", path, ": cannot map ", f.size(),
                " bytes for reading: ", std::strerror(errno));
    const size_t bytes = size_t(f.size());
    std::shared_ptr<const void> owner(base, [bytes](const void* p) { ::munmap(const_cast<void*>(p), bytes); });
    uint8_t* b = static_cast<uint8_t*>(base);
    s.add(std::make_shared<const Part>(
        Part{path, b + kTokenShardHeaderBytes, int64_t(h.count), h.token_bytes(), b, bytes, std::move(owner)}));
  }
  return s;
}

void TokenStream::add(std::shared_ptr<const Part> p) {
  if (p->count == 0) return;  // holds no token: never a window's part
  starts_.push_back(size_);
  size_ += p->count;
  parts_.push_back(std::move(p));
}

size_t TokenStream::part_of(int64_t i) const {
  ZT_CHECK(0 <= i && i < size_, "[data] token ", i, " is outside the ", size_, " tokens");
  return size_t(std::upper_bound(starts_.begin(), starts_.end(), i) - starts_.begin()) - 1;
}

uint32_t TokenStream::token(int64_t i) const {
  const size_t k = part_of(i);
  uint32_t t;
  widen(parts_[k]->data, parts_[k]->width, i - starts_[k], 1, &t);
  return t;
}

void TokenStream::copy(int64_t begin, int64_t n, int32_t* out) const {
  ZT_CHECK(n >= 0 && begin >= 0 && begin <= size_ - n, "[data] tokens [", begin, ", ", begin + n, ") are outside the ",
           size_, " tokens");
  while (n > 0) {
    const size_t k = part_of(begin);
    const Part& p = *parts_[k];
    const int64_t at = begin - starts_[k], m = std::min(n, p.count - at);
    widen(p.data, p.width, at, m, out);
    if (p.map_base) drop(p.map_base, p.map_bytes, p.offset(at), p.offset(at + m));
    out += m, begin += m, n -= m;
  }
}

void TokenStream::scan(int64_t begin, int64_t end,
                       const std::function<bool(int64_t, const uint32_t*, int64_t)>& fn) const {
  ZT_CHECK(0 <= begin && begin <= end && end <= size_, "[data] scan [", begin, ", ", end, ") is outside the ", size_,
           " tokens");
  std::vector<uint32_t> buf(size_t(std::min(kScanChunk, end - begin)));
  while (begin < end) {
    const size_t k = part_of(begin);
    const Part& p = *parts_[k];
    const int64_t stop = std::min(end - starts_[k], p.count);  // in the part
    // The whole mapping: advising a sub-range would split it into many mappings.
    if (p.map_base) advise(p.map_base, p.map_bytes, MADV_SEQUENTIAL);
    bool more = true;
    for (int64_t at = begin - starts_[k]; more && at < stop; at += kScanChunk) {
      const int64_t m = std::min(kScanChunk, stop - at);
      widen(p.data, p.width, at, m, buf.data());
      more = fn(starts_[k] + at, buf.data(), m);
      if (p.map_base) drop(p.map_base, p.map_bytes, p.offset(at), p.offset(at + m));
    }
    if (p.map_base) advise(p.map_base, p.map_bytes, MADV_NORMAL);
    if (!more) return;
    begin = starts_[k] + stop;
  }
}

TokenStream::Place TokenStream::locate(int64_t i) const {
  const size_t k = part_of(i);
  const Part& p = *parts_[k];
  const int64_t at = i - starts_[k];
  return {p.name, at, uint64_t(p.offset(at)), p.map_base != nullptr};
}

void check_token_range(const TokenStream& tokens, int64_t vocab_size) {
  ZT_CHECK(vocab_size >= 1, "[data] vocab_size must be >= 1, got ", vocab_size);
  int64_t bad = -1;
  uint32_t value = 0;
  tokens.scan(0, tokens.size(), [&](int64_t first, const uint32_t* t, int64_t n) {
    uint32_t top = 0;
    for (int64_t i = 0; i < n; ++i) top = std::max(top, t[i]);  // vectorizes; the search below rarely runs
    if (int64_t(top) < vocab_size) return true;
    const int64_t i = std::find_if(t, t + n, [&](uint32_t v) { return int64_t(v) >= vocab_size; }) - t;
    bad = first + i, value = t[i];
    return false;
  });
  if (bad < 0) return;
  const TokenStream::Place at = tokens.locate(bad);
  ZT_THROW_AS(ErrorKind::data, "[data] ", at.name, ": token ", at.index, " (byte offset ", at.byte_offset,
              at.mapped ? "" : " in a token shard", ") is ", value, ", outside the vocabulary of ", vocab_size,
              " (made by another tokenizer?)");
}

}  // namespace zt::data
