#pragma once
// safetensors files (8-byte little-endian header length, JSON header, raw little-endian data),
// the format Hugging Face uses for weights. Writes go to a unique temporary name, are fsynced,
// then renamed (Note [atomic files]), so an existing file is never left half-written.
#include <cstddef>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "zt/core/atomic_file.h"
#include "zt/core/tensor.h"

namespace zt::ckpt {

void save_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata = {});
// The same bytes into `out`, left uncommitted: for a caller that commits several files together.
void write_safetensors(AtomicFile& out, const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// A safetensors file written one tensor at a time: the header (every name, dtype and shape, known
// up front) first, then each tensor's bytes in that order, so the writer holds one tensor at most
// (a stage-3 model's consolidated weights never sit whole in memory).
struct TensorEntry {
  std::string name;
  DType dtype = DType::f32;
  Shape shape;
};
class SafetensorsWriter {
 public:
  SafetensorsWriter(AtomicFile& out, std::vector<TensorEntry> entries,
                    const std::map<std::string, std::string>& metadata);
  void write(const std::string& name, const Tensor& t);  // the next entry's tensor
  void finish() const;                                   // checks that every entry was written

 private:
  AtomicFile& out_;
  std::vector<TensorEntry> entries_;
  size_t next_ = 0;
};

struct LoadedTensors {
  std::string source;                                   // the file (or buffer name) read
  std::vector<std::pair<std::string, Tensor>> tensors;  // in file order (by data offsets)
  std::map<std::string, std::string> metadata;
  const Tensor* find(const std::string& name) const;
  // `name` as the weights of a parameter of `shape`: present, of that shape and a floating
  // dtype (F32, BF16, F16); else ErrorKind::checkpoint naming the file, the tensor and why.
  const Tensor& weight(const std::string& name, const Shape& shape) const;
};
// Every malformed file is ErrorKind::checkpoint naming the file and what is wrong (Note
// [safetensors validation] in safetensors.cpp): bad header length, JSON nested deeper than the
// format, duplicate keys, non-string metadata, unknown dtype, a shape that is not non-negative
// integers or whose size overflows, offsets out of range or overlapping another tensor.
// `path` must be a regular file; anything else is refused before it is opened.
LoadedTensors load_safetensors(const std::string& path);
// The header alone, validated as load_safetensors validates it, for ranged reads of big files:
// each tensor's dtype, shape and absolute byte range [begin, end) in the file, in file order.
struct SafetensorsEntry {
  std::string name;
  DType dtype = DType::f32;
  Shape shape;
  uint64_t begin = 0, end = 0;
};
struct SafetensorsHeader {
  std::string source;
  std::vector<SafetensorsEntry> tensors;
  std::map<std::string, std::string> metadata;
};
SafetensorsHeader read_safetensors_header(const std::string& path);
const char* safetensors_dtype_name(DType t);  // "F32", "BF16", ...
// The same from a file's bytes in memory (for fuzzing); `name` stands for the file in errors.
LoadedTensors parse_safetensors(const void* data, size_t size, const std::string& name = "<memory>");

}  // namespace zt::ckpt
