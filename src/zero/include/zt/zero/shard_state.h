#pragma once
// This rank's share of one flat buffer, stage- and residence-independent: what a checkpoint
// saves and what a load at another world size re-partitions.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "zt/core/tensor.h"

namespace zt::zero {

// One named tensor of a shard (param, master, exp_avg, ...): in memory, or in a swap file
// (optimizer offload) read and written by element ranges, so a checkpoint streams it tile by
// tile and never holds it whole.
struct ShardTensor {
  std::string name;
  DType dtype = DType::f32;
  int64_t numel = 0;
  Tensor tensor;  // defined when the tensor is in memory (a handle: writes go into the shard)
  std::function<void(int64_t begin, int64_t n, void* dst)> read_fn;         // otherwise
  std::function<void(int64_t begin, int64_t n, const void* src)> write_fn;  // otherwise

  static ShardTensor in_memory(std::string name, const Tensor& t);
  bool streamed() const { return !tensor.defined(); }
  // Elements [begin, begin + n) out of or into the shard, whichever residence.
  void read(int64_t begin, int64_t n, void* dst) const;
  void write(int64_t begin, int64_t n, const void* src) const;
  void zero() const;  // every element 0 (a load's padding, fresh optimizer states)
};

struct ShardState {
  size_t buffer = 0;
  int64_t offset = 0, numel = 0;     // range inside the buffer's padded layout
  std::vector<ShardTensor> tensors;  // param, master (16-bit runs), optimizer states
};

}  // namespace zt::zero
