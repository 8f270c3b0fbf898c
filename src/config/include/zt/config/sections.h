#pragma once
// Note [config sections]: the sections of the run configuration that the libraries take
// directly: the optimizer (optim::update), fp16's loss scaling (optim::LossScaler), and
// zero_optimization with its offload and aio keys (zero::EngineOptions). They live here, with
// std headers only, so that optim and zero include them without linking the JSON parser
// (CMake target zt_config_sections), and so that the engine reads the parsed values themselves,
// not a copy: a new key is one edit, the field below plus its parse line in config.cpp.
// Defaults are DeepSpeed's; parse() validates every key, and the libraries check again only what
// a direct caller could get wrong (optim::validate).
#include <cstdint>
#include <string>

namespace zt::config {

// `type` after parsing is Adam, AdamW or SGD. As in DeepSpeed, a file's type "Adam" with
// params.adam_w_mode true (DeepSpeed's default) becomes AdamW; adam_w_mode false keeps Adam (L2).
// optim::update runs on the float roundings of these numbers (the update is fp32).
struct OptimizerConfig {
  std::string type = "AdamW";  // Adam | AdamW | SGD (case-insensitive in the file)
  double lr = 1e-3;
  double beta1 = 0.9, beta2 = 0.999;  // params.betas [b1, b2]
  double eps = 1e-8;
  // Adam: L2 added to the gradient; AdamW: decoupled. Defaults as PyTorch's: AdamW 0.01, else 0.
  double weight_decay = 0.01;
  double momentum = 0.0;  // SGD
  bool nesterov = false;  // SGD
};

// zero_optimization.offload_optimizer / offload_param, DeepSpeed's keys and meanings. On a CPU
// run "cpu" means host memory, where the states already are; "nvme" means files under nvme_path.
struct OffloadConfig {
  std::string device = "none";  // none | cpu | nvme | auto (run.memory_budget_mb decides)
  std::string nvme_path;
  int64_t buffer_count = 4;  // tile buffers in memory (DeepSpeed's default for the optimizer)
  bool pin_memory = false, fast_init = false;
  // offload_optimizer on a device with clipping or fp16: the host's update speculates behind
  // backward from a snapshot of the states (Note [host update overlap]); twice the pinned states.
  bool super_offload = false;
  double ratio = 1.0;  // share of the states offloaded; only 1 is implemented
};

// DeepSpeed's aio section: how swap files are read and written (io_uring here).
struct AioConfig {
  int64_t block_size = 1048576;  // bytes per read or write submitted
  int64_t queue_depth = 8;
  int64_t intra_op_parallelism = 1;  // (its older name: thread_count); one ring per rank here
  bool single_submit = false, overlap_events = true;
};

// zero_optimization: sizes are elements. The engine derives the placement of its states and the
// swap files' settings from the offload sections and aio (zero::place, policy.h).
struct ZeroConfig {
  int stage = 0;
  bool overlap_comm = true;
  bool contiguous_gradients = true;
  int64_t reduce_bucket_size = 500'000'000;  // elements, as DeepSpeed
  int64_t allgather_bucket_size = 500'000'000;
  int64_t stage3_prefetch_bucket_size = 50'000'000;
  int64_t stage3_max_live_parameters = 1'000'000'000;
  int64_t stage3_param_persistence_threshold = 100'000;
  int64_t stage3_max_reuse_distance = 1'000'000'000;
  int64_t sub_group_size = 0;  // 0: not given (the swap tile is then 1M elements; DeepSpeed's default 1e9)
  OffloadConfig offload_optimizer, offload_param;
  // ZeRO++ (Note [ZeRO++] in zero/wire.h): stage 3's parameter all-gathers in int8; gradients
  // across nodes in int4 (or int8: zero_quantized_gradients_bits, a zerotrain key; stages 1-3);
  // a second copy of the parameters partitioned over zero_hpz_partition_size ranks (1: none,
  // else a divisor of the world size, usually the ranks per node), which backward gathers from.
  bool zero_quantized_weights = false;
  bool zero_quantized_gradients = false;
  int zero_quantized_gradients_bits = 4;
  int64_t zero_hpz_partition_size = 1;
};

// DeepSpeed's fp16 section (dynamic loss scaling unless loss_scale > 0). optim::LossScaler reads
// the loss-scale keys; `enabled` chooses the working dtype, which the engine is given.
struct Fp16Config {
  bool enabled = false;
  bool auto_cast = false;  // accepted: floating inputs are always cast to the working dtype
  double loss_scale = 0;   // > 0: static scale
  int initial_scale_power = 16, loss_scale_window = 1000, hysteresis = 2;
  bool consecutive_hysteresis = false;
  double min_loss_scale = 1;
};

}  // namespace zt::config
