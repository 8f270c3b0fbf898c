#pragma once
// Sequence classification records (BERT fine-tuning): token sequences with a class label each,
// in a small binary file of our own, and padded batches from them.
//
// Note [seq-cls format]: little-endian throughout.
//   header, 32 bytes: magic "ZTSEQCLS" (8 bytes), uint32 version = 1, uint32 num_classes (>= 1),
//                     uint32 max_len (1..65535), uint32 vocab_size (1..65536), uint64 num_records
//   then num_records records: uint16 label (< num_classes), uint16 length (1..max_len),
//                     length x uint16 tokens (< vocab_size)
//   and nothing after the last record.
// The reader checks every field and names the file, the record and the byte offset of what is
// wrong (ErrorKind::data); the writer is atomic (AtomicFile).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "zt/core/tensor.h"
#include "zt/data/sampler.h"

namespace zt::data {

inline constexpr char kSeqClsMagic[8] = {'Z', 'T', 'S', 'E', 'Q', 'C', 'L', 'S'};
inline constexpr uint32_t kSeqClsVersion = 1;
inline constexpr size_t kSeqClsHeaderBytes = 32;

struct SeqClsSet {
  int32_t num_classes = 0, max_len = 0, vocab_size = 0;
  std::vector<int32_t> labels;   // one per record
  std::vector<int64_t> offsets;  // record i is tokens[offsets[i], offsets[i + 1])
  std::vector<uint16_t> tokens;

  SeqClsSet() = default;
  SeqClsSet(int32_t num_classes, int32_t max_len, int32_t vocab_size);  // checked as the reader checks
  int64_t size() const { return int64_t(labels.size()); }
  int64_t length(int64_t i) const { return offsets[size_t(i) + 1] - offsets[size_t(i)]; }
  // Appends a record; a label, length or token outside the header's limits is invalid_argument.
  void add(int32_t label, const std::vector<int32_t>& ids);
  std::vector<int64_t> class_counts() const;
};

SeqClsSet read_seq_cls(const std::string& path);
// The same from bytes in memory (fuzzing); `name` stands for the file in errors.
SeqClsSet parse_seq_cls(const void* data, size_t size, const std::string& name = "<memory>");
void write_seq_cls(const std::string& path, const SeqClsSet& set);

struct SeqClsBatch {
  Tensor ids;     // [b, max_len] i32, padded with [PAD] = 0
  Tensor mask;    // [b, max_len] i32, 1 on tokens, 0 on padding
  Tensor labels;  // [b] i32
};
// Records `indices` (each in [0, size)), padded to the set's max_len.
SeqClsBatch gather_seq_cls(const SeqClsSet& set, const std::vector<int64_t>& indices);

// Training batches by step, laid out as Note [global batch layout] (sampler.h) says.
class SeqClsBatches {
 public:
  SeqClsBatches(SeqClsSet set, const BatchLayout& layout, uint64_t seed, bool shuffle = true);
  const SeqClsSet& set() const { return set_; }
  int64_t steps_per_epoch() const { return sampler_.steps_per_epoch(); }
  SeqClsBatch micro_batch(int64_t step, int64_t m) const { return gather_seq_cls(set_, sampler_.micro_batch(step, m)); }
  SeqClsBatch global_batch(int64_t step) const { return gather_seq_cls(set_, sampler_.global_batch(step)); }

 private:
  SeqClsSet set_;
  StepSampler sampler_;
};

}  // namespace zt::data
