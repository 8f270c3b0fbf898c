#pragma once
// What a ZeRO run partitions and in which precision, computed once from the options: the
// collaborators read these facts instead of branching on the stage number.
#include <cstdint>
#include <optional>
#include <string>

#include "zt/config/sections.h"
#include "zt/core/device.h"
#include "zt/core/dtype.h"

namespace zt::zero {

// Where this rank's fp32 master and optimizer states (or stage 3's parameter shards) live: in the
// compute device's memory; in pinned host memory beside a device, updated by the host's kernel
// (ZeRO-Offload, Note [host residence] in optim_shard.cpp); or in a swap file streamed through a
// few tile buffers (offload_optimizer.device = nvme, Note [optimizer swap]). Each is a tier of
// its own file (Note [residence tiers] in src/zero/residence.h).
enum class Residence { memory, host, file };

// What a residence is made of, which is all the engine's shared paths ask of it: the compute
// device's memory; host memory beside a device (the host updates what it holds, its gradients
// come down and its parameters go up); or files, streamed through tile buffers in memory.
enum class Medium { compute, host, files };
Medium medium_of(Residence r);

// The file residence's knobs: DeepSpeed's offload_optimizer and aio keys, as place() derives
// them; the defaults are the config's.
struct SwapOptions {
  std::string dir;        // the run's folder <nvme_path>/<run>; rank r swaps in dir/rank<r>
  std::string param_dir;  // the same for parameter files (offload_param.nvme_path; empty: dir)
  int64_t tile_elems =
      int64_t(1) << 20;  // elements of each state per tile (sub_group_size); the plan rounds it up to 1024
  int buffers = int(config::OffloadConfig{}.buffer_count);  // tile buffers in RAM: reads ahead, writes behind
  int64_t block_bytes = config::AioConfig{}.block_size;     // aio.block_size: bytes per submitted read or write
  int queue_depth = int(config::AioConfig{}.queue_depth);   // aio.queue_depth: the ring's entries
  bool single_submit = config::AioConfig{}.single_submit;   // aio.single_submit: submit each block by itself
  // aio.overlap_events: false waits for each tile's I/O before the next
  bool overlap_events = config::AioConfig{}.overlap_events;
};

// What the swap files (Residence::file) and a device's staging shards (Note [host residence]) did
// since the engine was built; zeros where neither is in use.
struct SwapStats {
  uint64_t bytes_read = 0, bytes_written = 0;
  double io_wait_s = 0;                      // blocked waiting for reads and writes
  double read_wait_s = 0, write_wait_s = 0;  // the same, split
  double compute_s = 0;                      // updating tiles
  double down_s = 0, up_s = 0;               // on a device: gradients copied down, parameters up
  uint64_t bytes_down = 0, bytes_up = 0;
  // Note [host update overlap]: the updates that ran during backward, their time (also in
  // compute_s) and how long the step waited for them: 1 - wait / time is the share hidden.
  uint64_t early_updates = 0, early_redone = 0;  // redone: speculated, then clipped or skipped
  double early_s = 0, early_wait_s = 0;
  bool direct = false;  // O_DIRECT in use
};
SwapStats& operator+=(SwapStats& a, const SwapStats& b);

// Note [wire plan]: what ZeRO++ puts on the wire, decided once from the config and the topology
// (world size, ranks per node) by plan_wire: the engine's groups, its reducer and param store,
// `estimate`'s summary and the peak predictor all read this, none derives it again.
struct WirePlan {
  int gradient_bits = 0;      // qgZ: int-N gradients across nodes; 0 = dense (off, or one node: nothing crosses)
  bool int8_weights = false;  // qwZ: stage 3's gathers carry int8 blocks
  int64_t hpz_partition = 1;  // hpZ: backward's gathers among P consecutive ranks (1: off)
  int local_size = 1;         // ranks per node
  int nodes = 1;
};
WirePlan plan_wire(const config::ZeroConfig& zero, int world, int local_size);

struct Policy {
  int stage = 0;
  // run.device: where the flat buffers, the model's parameters and its activations live; the host
  // reads back only what it prints (Note [sim device] for the simulated one).
  Device device = Device::cpu();
  DType param_dtype = DType::f32;  // parameters as gathered, published and saved
  // What the model computes in: param_dtype, or f32 for a 16-bit run on the f32 product path, whose
  // gathered weights are widened once into f32 copies (Note [f32 compute] in param_store.cpp).
  DType compute_dtype = DType::f32;
  DType grad_accum_dtype = DType::f32;  // where gradients accumulate across micro-batches
  DType comm_dtype = DType::f32;        // gradients on the wire
  bool fp32_master = false;             // 16-bit parameters keep an fp32 master in the optimizer shard
  bool loss_scaling = false;            // fp16: dynamic (or static) loss scaling
  // Note [host update overlap]: offload_optimizer.super_offload beside a device with the states in
  // pinned host memory and the gradients' scale known only after backward (clipping, fp16): the
  // host updates behind backward speculatively (scale 1/loss scale) from a snapshot of the master
  // and states, to redo from.
  bool snapshot_host_update = false;
  // Note [host gradient shard]: stages 2-3 on a device with the optimizer on the host and one
  // micro-batch a step: each buffer's reduced gradient goes straight down into pinned host memory
  // (DeepSpeed's offload keeps its gradients there too), so the device holds no gradient shard.
  bool grads_to_host = false;
  Residence optimizer_residence = Residence::memory;
  // Stage 3 (offload_param.device = nvme): each non-persistent unit's parameter shard lives in a
  // swap file, read ahead of its all-gather (Note [parameter swap] in param_store.cpp); with
  // offload_param.device = cpu on a device, in pinned host memory (Note [host residence]).
  Residence param_residence = Residence::memory;
  SwapOptions swap;  // used with Residence::file
  WirePlan wire;     // Note [wire plan]

  Medium optimizer_medium() const { return medium_of(optimizer_residence); }
  Medium param_medium() const { return medium_of(param_residence); }
  bool swaps() const { return optimizer_medium() == Medium::files || param_medium() == Medium::files; }

  bool shard_optimizer() const { return stage >= 1; }
  bool shard_gradients() const { return stage >= 2; }
  bool shard_parameters() const { return stage >= 3; }
  // Stages 2-3 send gradients away every micro-batch; stages 0-1 accumulate the full gradient
  // and reduce at the accumulation boundary.
  bool reduce_every_micro_batch() const { return shard_gradients(); }
  bool widens() const { return compute_dtype != param_dtype; }
  // Dtype of a buffer's full gradient: the accumulation dtype where it persists (stages 0-1),
  // the parameters' dtype where it is transient (stages 2-3, the shard accumulates).
  DType full_grad_dtype() const { return shard_gradients() ? param_dtype : grad_accum_dtype; }
};

// Defaults as DeepSpeed: gradients accumulate and travel in the working dtype unless
// data_types.grad_accum_dtype / communication_data_type say otherwise.
Policy make_policy(int stage, DType param_dtype, std::optional<DType> grad_accum_dtype,
                   std::optional<DType> comm_dtype);

// Note [placement]: where a run's states live, as one value. The offload devices are strings of the
// config only until configured_placement reads them, once ("nvme": Residence::file; "cpu" beside a
// device, a GPU or sim: Residence::host; otherwise, "auto" included, memory); zero::place
// (placement.h) resolves "auto" against the budgets; the engine takes the Placement
// (EngineOptions::placement) and set_placement writes it into the policy with the swap settings:
// files under <nvme_path>/<run_name>/rank<r>/ (run_name "": nvme_path itself; swap_run_name
// below), sub_group_size the tile (when given), offload_optimizer.buffer_count the optimizer's tile
// buffers, aio the reads and writes. A new residence is its enum value, its tier's file
// (Note [residence tiers]) and its candidate in zero::place.
struct Placement {
  Residence optimizer = Residence::memory, param = Residence::memory;
  bool lowered_limits = false;  // one gradient bucket in flight, no stage-3 prefetch or reuse
  // with lowered limits on a device: reduce_bucket_size, so large gradients go in rounds (0: as configured)
  int64_t reduce_bucket = 0;
  bool operator==(const Placement&) const = default;
};
// DeepSpeed's offload device of a residence: "none", "cpu" (pinned host memory beside a device), "nvme".
std::string offload_device(Residence r);
std::string residence_name(Residence r);  // as the start line says where it is: "pinned host memory", ...
// The residence an offload device names beside a device or not; nullopt for "auto". On a CPU run
// "cpu" is where the states already are: memory.
std::optional<Residence> residence_of(const std::string& offload_device, bool beside_device);
// The offload sections' devices as a placement ("auto": memory; zero::place resolves it first).
Placement configured_placement(const config::ZeroConfig& zero, bool beside_device);
void set_placement(Policy& p, const Placement& at, const config::ZeroConfig& zero, const config::AioConfig& aio,
                   const std::string& run_name);
// Note [swap path]: the run's swap folder name, from its run.dir's whole path ("mnist_mlp-3fa2b1c0"),
// so two runs whose run.dir share a last name never share swap files, and ".." stays below nvme_path.
std::string swap_run_name(const std::string& run_dir);
// ZeRO++'s secondary partition (zero_hpz_partition_size) must divide the world size: else a
// config error naming the nearest valid sizes. `train` and `estimate` both ask.
void check_hpz_partition(int64_t partition, int world);

}  // namespace zt::zero
