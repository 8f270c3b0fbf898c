#pragma once
// A split's tokens: one or more token shards, mapped, presented as one sequence (token_shard.h).
//
// Note [mapped token shards]: the shards are mapped read-only (MAP_SHARED) and concatenated in
// the order given, so the sequence, its windows and every trajectory are those of the old
// std::vector that held all tokens. Nothing is copied up front: a rank pages in only the windows
// it reads, and copy() unmaps them again (MADV_DONTNEED, rounded out to the 2 MiB page-cache
// folio a fault maps whole), so resident memory does not grow with the corpus over an epoch; the
// pages stay in the page cache, shared by the ranks of a host, and a re-read is a minor fault.
// Whole passes (the vocabulary check, the n-gram baseline) go through scan(): sequential reads
// (MADV_SEQUENTIAL), each chunk dropped after it. A shard truncated while mapped raises SIGBUS
// when read: do not rewrite shards under a run.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace zt::data {

class TokenStream {
 public:
  TokenStream() = default;
  // Tokens in memory (tests, prepare); `name` stands for them in errors, with byte offsets as in
  // one version 1 (or 2) shard. Implicit: a vector of tokens is a stream of them.
  TokenStream(std::vector<uint16_t> tokens, std::string name = "<tokens>");
  TokenStream(std::vector<uint32_t> tokens, std::string name = "<tokens>");
  // The shards at `paths` (versions may differ), mapped, one after another; a bad header or size
  // is read_token_shard's data error, naming the file and the byte offset.
  static TokenStream map_files(const std::vector<std::string>& paths);

  int64_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  int64_t num_parts() const { return int64_t(parts_.size()); }
  uint32_t token(int64_t i) const;
  // Tokens [begin, begin + n), across part boundaries, into out[0, n); their pages are dropped.
  void copy(int64_t begin, int64_t n, int32_t* out) const;
  // fn(first, tokens, count) over [begin, end) in order, in chunks of at most kScanChunk tokens,
  // until it returns false; a mapped part's pages are dropped after each chunk (Note [mapped
  // token shards]).
  static constexpr int64_t kScanChunk = int64_t(1) << 20;
  void scan(int64_t begin, int64_t end, const std::function<bool(int64_t, const uint32_t*, int64_t)>& fn) const;

  struct Place {
    std::string name;          // the file, or the in-memory tokens' name
    int64_t index = 0;         // the token's index there
    uint64_t byte_offset = 0;  // its byte offset in that file (in memory: as in one shard)
    bool mapped = false;
  };
  Place locate(int64_t i) const;  // where token i lies

 private:
  struct Part;
  size_t part_of(int64_t i) const;  // the part holding token i
  void add(std::shared_ptr<const Part> p);
  std::vector<std::shared_ptr<const Part>> parts_;
  std::vector<int64_t> starts_;  // first token of each part
  int64_t size_ = 0;
};

// The first token >= vocab_size is a data error naming its file and byte offset there (a shard
// made with another tokenizer, or a model with too small a vocabulary). One scan().
void check_token_range(const TokenStream& tokens, int64_t vocab_size);

}  // namespace zt::data
