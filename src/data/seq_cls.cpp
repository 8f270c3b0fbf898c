// Sequence classification records (Note [seq-cls format] in seq_cls.h) and padded batches.
#include "zt/data/seq_cls.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "input_file.h"
#include "zt/core/atomic_file.h"
#include "zt/core/error.h"

namespace zt::data {
namespace {

static_assert(std::endian::native == std::endian::little, "seq-cls files are little-endian; so is this code");

constexpr size_t kRecordHeaderBytes = 4;   // uint16 label, uint16 length
constexpr size_t kMinRecordBytes = 4 + 2;  // a record holds at least one token
constexpr uint32_t kMaxClasses = 65536;    // labels are uint16
constexpr uint32_t kMaxLen = 65535;        // lengths are uint16
constexpr uint32_t kMaxVocab = 65536;      // tokens are uint16

uint16_t le16(const uint8_t* b) { return uint16_t(b[0] | b[1] << 8); }
uint32_t le32(const uint8_t* b) { return uint32_t(le16(b)) | uint32_t(le16(b + 2)) << 16; }
uint64_t le64(const uint8_t* b) { return uint64_t(le32(b)) | uint64_t(le32(b + 4)) << 32; }

}  // namespace

SeqClsSet::SeqClsSet(int32_t classes, int32_t len, int32_t vocab)
    : num_classes(classes), max_len(len), vocab_size(vocab), offsets{0} {
  ZT_CHECK(classes >= 1 && uint32_t(classes) <= kMaxClasses, "[data] num_classes must be in 1..", kMaxClasses, ", got ",
           classes);
  ZT_CHECK(len >= 1 && uint32_t(len) <= kMaxLen, "[data] max_len must be in 1..", kMaxLen, ", got ", len);
  ZT_CHECK(vocab >= 1 && uint32_t(vocab) <= kMaxVocab, "[data] vocab_size must be in 1..", kMaxVocab, ", got ", vocab);
}

void SeqClsSet::add(int32_t label, const std::vector<int32_t>& ids) {
  ZT_CHECK(max_len >= 1, "[data] SeqClsSet::add on a set without a header (construct it with its limits)");
  ZT_CHECK(0 <= label && label < num_classes, "[data] label ", label, " is outside 0..", num_classes - 1);
  ZT_CHECK(!ids.empty() && int64_t(ids.size()) <= max_len, "[data] a record needs 1..", max_len, " tokens, got ",
           ids.size());
  for (int32_t t : ids)
    ZT_CHECK(0 <= t && t < vocab_size, "[data] token ", t, " is outside the vocabulary of ", vocab_size);
  labels.push_back(label);
  tokens.insert(tokens.end(), ids.begin(), ids.end());
  offsets.push_back(int64_t(tokens.size()));
}

std::vector<int64_t> SeqClsSet::class_counts() const {
  std::vector<int64_t> counts(size_t(std::max(num_classes, 0)), 0);
  for (int32_t l : labels) ++counts[size_t(l)];
  return counts;
}

SeqClsSet parse_seq_cls(const void* data, size_t size, const std::string& name) {
  const uint8_t* b = static_cast<const uint8_t*>(data);
  ZT_CHECK_AS(ErrorKind::data, size >= kSeqClsHeaderBytes, "[data] ", name, ": truncated at byte offset ", size,
              ": a seq-cls header needs ", kSeqClsHeaderBytes, " bytes but file has ", size, " bytes");
  ZT_CHECK_AS(ErrorKind::data, std::memcmp(b, kSeqClsMagic, sizeof kSeqClsMagic) == 0, "[data] ", name,
              ": bad magic at byte offset 0: expected \"ZTSEQCLS\" (a zerotrain seq-cls file)");
  const uint32_t version = le32(b + 8), classes = le32(b + 12), len = le32(b + 16), vocab = le32(b + 20);
  const uint64_t n = le64(b + 24);
  ZT_CHECK_AS(ErrorKind::data, version == kSeqClsVersion, "[data] ", name, ": unsupported seq-cls version ", version,
              " at byte offset 8 (this reader knows version ", kSeqClsVersion, ")");
  ZT_CHECK_AS(ErrorKind::data, classes >= 1 && classes <= kMaxClasses, "[data] ", name, ": num_classes ", classes,
              " at byte offset 12 is outside 1..", kMaxClasses);
  ZT_CHECK_AS(ErrorKind::data, len >= 1 && len <= kMaxLen, "[data] ", name, ": max_len ", len,
              " at byte offset 16 is outside 1..", kMaxLen);
  ZT_CHECK_AS(ErrorKind::data, vocab >= 1 && vocab <= kMaxVocab, "[data] ", name, ": vocab_size ", vocab,
              " at byte offset 20 is outside 1..", kMaxVocab);
  const uint64_t most = (size - kSeqClsHeaderBytes) / kMinRecordBytes;  // bounds what is reserved below
  ZT_CHECK_AS(ErrorKind::data, n <= most, "[data] ", name, ": header says ", n,
              " records at byte offset 24 but the file's ", size - kSeqClsHeaderBytes,
              " bytes after the header hold at most ", most, " (truncated?)");

  SeqClsSet set{int32_t(classes), int32_t(len), int32_t(vocab)};
  set.labels.reserve(size_t(n));
  set.offsets.reserve(size_t(n) + 1);
  set.tokens.reserve((size - kSeqClsHeaderBytes) / 2);
  size_t at = kSeqClsHeaderBytes;
  for (uint64_t i = 0; i < n; ++i) {
    ZT_CHECK_AS(ErrorKind::data, size - at >= kRecordHeaderBytes, "[data] ", name, ": truncated at byte offset ", size,
                ": record ", i, " of ", n, " starts at byte offset ", at, " but its label and length need ",
                kRecordHeaderBytes, " bytes");
    const uint16_t label = le16(b + at), k = le16(b + at + 2);
    ZT_CHECK_AS(ErrorKind::data, label < classes, "[data] ", name, ": record ", i, ": label ", label,
                " at byte offset ", at, " is outside 0..", classes - 1);
    ZT_CHECK_AS(ErrorKind::data, k >= 1 && k <= len, "[data] ", name, ": record ", i, ": length ", k,
                " at byte offset ", at + 2, " is outside 1..", len, " (max_len)");
    at += kRecordHeaderBytes;
    ZT_CHECK_AS(ErrorKind::data, size - at >= 2 * size_t(k), "[data] ", name, ": truncated at byte offset ", size,
                ": record ", i, " has ", k, " tokens from byte offset ", at, " (needs ", 2 * size_t(k), " bytes)");
    for (size_t t = 0; t < k; ++t, at += 2) {
      const uint16_t tok = le16(b + at);
      ZT_CHECK_AS(ErrorKind::data, tok < vocab, "[data] ", name, ": record ", i, ": token ", tok, " at byte offset ",
                  at, " is outside the vocabulary of ", vocab);
      set.tokens.push_back(tok);
    }
    set.labels.push_back(label);
    set.offsets.push_back(int64_t(set.tokens.size()));
  }
  ZT_CHECK_AS(ErrorKind::data, at == size, "[data] ", name, ": ", size - at, " trailing bytes at byte offset ", at,
              " after the ", n, " records the header announces");
  return set;
}

SeqClsSet read_seq_cls(const std::string& path) {
  const std::string bytes = detail::read_file_bytes(path);
  return parse_seq_cls(bytes.data(), bytes.size(), path);
}

void write_seq_cls(const std::string& path, const SeqClsSet& set) {
  ZT_CHECK(set.max_len >= 1 && set.offsets.size() == set.labels.size() + 1,
           "[data] write_seq_cls: the set has no header limits or inconsistent offsets");
  std::string out(kSeqClsHeaderBytes, '\0');
  auto put = [&](size_t at, const void* v, size_t n) { std::memcpy(out.data() + at, v, n); };
  const uint32_t fields[4] = {kSeqClsVersion, uint32_t(set.num_classes), uint32_t(set.max_len),
                              uint32_t(set.vocab_size)};
  const uint64_t n = uint64_t(set.size());
  put(0, kSeqClsMagic, sizeof kSeqClsMagic);
  put(8, fields, sizeof fields);
  put(24, &n, sizeof n);
  for (int64_t i = 0; i < set.size(); ++i) {
    const uint16_t head[2] = {uint16_t(set.labels[size_t(i)]), uint16_t(set.length(i))};
    out.append(reinterpret_cast<const char*>(head), sizeof head);
    out.append(reinterpret_cast<const char*>(set.tokens.data() + set.offsets[size_t(i)]),
               size_t(set.length(i)) * sizeof(uint16_t));
  }
  write_file_atomic(path, out, ErrorKind::data, "[data]");
}

SeqClsBatch gather_seq_cls(const SeqClsSet& set, const std::vector<int64_t>& indices) {
  const int64_t b = int64_t(indices.size()), T = set.max_len;
  SeqClsBatch out{Tensor::zeros({b, T}, DType::i32), Tensor::zeros({b, T}, DType::i32), Tensor::empty({b}, DType::i32)};
  int32_t* ids = out.ids.data<int32_t>();
  int32_t* mask = out.mask.data<int32_t>();
  int32_t* labels = out.labels.data<int32_t>();
  for (int64_t r = 0; r < b; ++r) {
    const int64_t i = indices[size_t(r)];
    ZT_CHECK(0 <= i && i < set.size(), "[data] record ", i, " is outside the ", set.size(), " records");
    const int64_t k = set.length(i);
    const uint16_t* src = set.tokens.data() + set.offsets[size_t(i)];
    for (int64_t t = 0; t < k; ++t) ids[r * T + t] = src[t], mask[r * T + t] = 1;
    labels[r] = set.labels[size_t(i)];
  }
  return out;
}

SeqClsBatches::SeqClsBatches(SeqClsSet set, const BatchLayout& layout, uint64_t seed, bool shuffle)
    : set_(std::move(set)), sampler_(set_.size(), layout, seed, shuffle, "records") {}

}  // namespace zt::data
