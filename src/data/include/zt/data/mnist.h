#pragma once
// MNIST / Fashion-MNIST IDX files (raw or gzip), and deterministic sampling from a seed.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "zt/core/tensor.h"

namespace zt::data {

// One IDX file: magic 0x00000803 (images, uint8, [n, rows, cols]) or 0x00000801 (labels, [n]),
// raw or gzip (told by the gzip magic). The header is checked before the payload is read, and
// never more is decoded than it says (plus a bounded look for trailing bytes). Errors are
// ErrorKind::data and name the file and, for a short or corrupt file, the byte offset and the
// expected and actual size.
struct IdxArray {
  std::vector<int64_t> dims;
  std::vector<uint8_t> bytes;  // row-major uint8 payload
};
// Reads `path`, or `path`.gz if only that exists; it must be a regular file (checked before opening).
IdxArray read_idx(const std::string& path);
// The same from a file's bytes in memory (for fuzzing); `name` stands for the file in errors.
IdxArray parse_idx(const void* data, size_t size, const std::string& name = "<memory>");

struct Dataset {
  Tensor images;  // [n, rows*cols] f32, normalised (x/255 - mean) / std
  Tensor labels;  // [n] i32
  int64_t size() const { return labels.defined() ? labels.numel() : 0; }
};
// split: "train" or "test"; file names as in the original distribution
// ({train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]). limit > 0 keeps the first `limit`.
// Both headers are checked before either payload is read; an empty split is a data error, and
// a split larger than the memory budget leaves is ErrorKind::out_of_memory saying its size.
Dataset load_mnist(const std::string& dir, const std::string& split, float mean = 0.1307f, float stddev = 0.3081f,
                   int64_t limit = 0);

// Each row of ds.images is a [channels, size, size] image: returns them centred in [channels, to,
// to] ((to - size) / 2 before, the rest after), channel c's border filled with fill[c] (the
// normalised value of a black pixel, so padding reads as black). Labels are shared.
Dataset pad_images(const Dataset& ds, int64_t channels, int64_t size, int64_t to, const std::vector<float>& fill);

// The order of samples for an epoch: a permutation of [0, n) from (seed, epoch), or identity.
std::vector<int64_t> epoch_order(int64_t n, uint64_t seed, int64_t epoch, bool shuffle);

// Copies the rows `indices[begin, end)` of a dataset into a batch.
struct Batch {
  Tensor x;  // [b, features] f32
  Tensor y;  // [b] i32
};
Batch gather_batch(const Dataset& ds, const std::vector<int64_t>& indices, int64_t begin, int64_t end);

}  // namespace zt::data
