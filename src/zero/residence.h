#pragma once
// Note [residence]: where the tensors of one shard live (an optimizer shard's fp32 master and
// states, or a stage-3 unit's parameter shard), as ggml's buffer types: one interface, a tier per
// file (Note [residence tiers] below). In memory (residence_memory.cpp): the tensors whole, in the
// compute device's memory (or the host's, for a cpu run), or in pinned host memory beside a device
// (residence_host.cpp), where the HostTier (host_tier.h) moves gradients down and parameters up
// around them (Note [host residence]). In files (residence_file.cpp): a swap file streamed through
// shared tile buffers (Note [optimizer swap]).
// The optimizer shard updates any of them with one loop over visit(); the parameter store reads a
// shard in whole ahead of its gather and writes it back after its update (start_read,
// write_whole: Note [parameter swap]); a checkpoint reads and writes their tensors through tensor(j).
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "zt/core/allocator.h"
#include "zt/core/tensor.h"
#include "zt/zero/plan.h"
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

// Note [residence tiers]: as ggml's buffer types, each Residence has one ResidenceTier, a struct of
// plain functions filled by its own file: residence_memory.cpp (the compute device's memory),
// residence_host.cpp (pinned host memory beside a device), residence_file.cpp (swap files).
// tier_of is the one switch over residences; the engine's shared paths ask medium_of (what the
// tier is made of: the host tier's copies and worker serve every host-medium tier beside a device,
// the swap paths every files-medium one), never which residence it is. So a new residence is its
// enum value, its case in tier_of, its file and its candidate in zero::place (placement.cpp).

// What one rank's optimizer buffers in a tier share: its swap folder and tile buffers (files).
struct TierShared {
  std::string dir;
  int64_t tile = 0;           // elements of each tensor per tile
  std::vector<Tensor> slots;  // the tile buffers (master first, each a tile)
};

// Buffer b of the optimizer shard: `count` tensors of n elements (a master first where `master`,
// which starts from initial(), then the optimizer's states, zeros).
struct OptimBuffer {
  const Plan& plan;
  size_t b;
  int64_t n;
  size_t count;
  bool master;
  std::function<Tensor()> initial;
  TierShared& shared;
};

struct ResidenceTier {
  const char* name;            // where it is, for the start line: "pinned host memory", "swap files"
  const char* offload_device;  // DeepSpeed's offload device naming it ("none", "cpu", "nvme")
  Medium medium;
  // A shard's tensor of n zeros, tagged, in this tier's memory (null for files, which hold none).
  Tensor (*zeros)(int64_t n, DType dtype, Device compute, MemTag tag) = nullptr;
  // The optimizer shard's set-up on this rank, once before its buffers (null: nothing shared).
  void (*share)(const Plan& plan, int rank, TierShared& shared) = nullptr;
  std::unique_ptr<ShardResidence> (*optimizer_buffer)(const OptimBuffer& buffer);
  // Plan::memory's master and optimizer bytes as this tier keeps them in memory (null: as counted whole).
  void (*account)(const Plan& plan, MemoryEstimate& e) = nullptr;
};

const ResidenceTier& tier_of(Residence r);  // residence.cpp
const ResidenceTier& memory_tier();         // residence_memory.cpp
const ResidenceTier& host_memory_tier();    // residence_host.cpp
const ResidenceTier& file_tier();           // residence_file.cpp

// The optimizer buffer of a tier held in memory on `device`: its tensors from tier.zeros, visited whole.
std::unique_ptr<ShardResidence> optimizer_buffer_in_memory(const ResidenceTier& tier, const OptimBuffer& buffer,
                                                           Device device);

}  // namespace zt::zero
