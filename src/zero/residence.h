#pragma once
// Note [residence]: where the tensors of one shard live (an optimizer shard's fp32 master and
// states, or a stage-3 unit's parameter shard), as ggml's buffer types: one interface, a tier per
// file. Memory (residence_memory.cpp): the tensors whole in the compute device's memory (or the
// host's, for a cpu run), or in pinned host memory beside a device, where the HostTier
// (host_tier.h) moves gradients down and parameters up around them (Note [host residence]). Files
// (residence_file.cpp): a swap file streamed through shared tile buffers (Note [optimizer swap]).
// The optimizer shard updates any of them with one loop over visit(); the parameter store reads a
// shard in whole ahead of its gather and writes it back after its update (start_read,
// write_whole: Note [parameter swap]); a checkpoint reads and writes their tensors through tensor(j).
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "zt/core/tensor.h"
#include "zt/zero/policy.h"
#include "zt/zero/shard_state.h"

namespace zt::zero {

class ShardResidence {
 public:
  // views[j]: tensor j's elements [begin, begin + len), updated in place.
  using TileFn = std::function<void(int64_t begin, int64_t len, const std::vector<Tensor>& views)>;
  virtual ~ShardResidence() = default;

  virtual int64_t numel() const = 0;
  virtual Device device() const = 0;  // where visit()'s views are
  // Every tile in order. A tier whose tiles were never written (a fresh file, Note [fresh swap
  // files]) has `fresh` fill a tile's views (zeroed first) instead of reading them; without it,
  // tensor 0 takes the initial values the tier was made with.
  virtual void visit(const TileFn& fn, const TileFn& fresh = nullptr) = 0;
  virtual ShardTensor tensor(size_t j, const std::string& name) = 0;  // in memory, or streamed
  virtual SwapStats stats() const { return {}; }                      // a file's I/O
  // Tensor 0 whole, in the tier's records one after another (`dst` page aligned, its records'
  // bytes): start_read starts reading it in, finish_read waits and verifies; write_whole writes
  // it back and waits.
  virtual void start_read(void* dst) = 0;
  virtual void finish_read() = 0;
  virtual void write_whole(const void* src) = 0;
};

// `tensors` (each `numel` elements) in memory on `device`, visited whole in one call (even when empty).
std::unique_ptr<ShardResidence> memory_residence(int64_t numel, Device device, std::vector<Tensor> tensors);

// `count` tensors of `numel` elements of `dtype` in the swap file `path`: record t holds elements
// [t*tile, (t+1)*tile) of each, one after another (tile a multiple of 1024: whole pages), visited
// through `slots` (f32 tile buffers of one record each, shared by the files of one shard; none
// where the file is only read and written whole). `initial` gives tensor 0's values before the
// first write (null: zeros, as for every other tensor).
struct FileTiles {
  std::vector<Tensor>* slots = nullptr;  // null: none
  int64_t tile = 0;
  SwapOptions opts;
  DType dtype = DType::f32;
};
std::unique_ptr<ShardResidence> file_residence(const std::string& path, int64_t numel, size_t count,
                                               const FileTiles& tiles, std::function<Tensor()> initial);

}  // namespace zt::zero
