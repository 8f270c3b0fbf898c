#include "zt/zero/plan.h"

#include <algorithm>
#include <filesystem>
#include <limits>

#include "grad_blocks.h"
#include "residence.h"
#include "zt/core/error.h"

namespace zt::zero {

Policy make_policy(int stage, DType param_dtype, std::optional<DType> grad_accum_dtype,
                   std::optional<DType> comm_dtype) {
  ZT_CHECK_AS(ErrorKind::config, stage >= 0 && stage <= 3, "[zero] zero_optimization.stage must be 0, 1, 2 or 3, got ",
              stage);
  for (DType d : {param_dtype, grad_accum_dtype.value_or(param_dtype), comm_dtype.value_or(param_dtype)})
    ZT_CHECK_AS(ErrorKind::config, is_floating(d), "[zero] training dtype must be f32, bf16 or f16, got ",
                dtype_name(d));
  Policy p;
  p.stage = stage;
  p.param_dtype = param_dtype;
  p.compute_dtype = param_dtype;
  p.grad_accum_dtype = grad_accum_dtype.value_or(param_dtype);
  p.comm_dtype = comm_dtype.value_or(param_dtype);
  p.fp32_master = param_dtype != DType::f32;
  p.loss_scaling = param_dtype == DType::f16;
  return p;
}

Placement configured_placement(const config::ZeroConfig& zero, bool beside_device) {
  return {residence_of(zero.offload_optimizer.device, beside_device).value_or(Residence::memory),
          residence_of(zero.offload_param.device, beside_device).value_or(Residence::memory)};
}

void set_placement(Policy& p, const Placement& at, const config::ZeroConfig& zero, const config::AioConfig& aio,
                   const std::string& run_name) {
  auto folder = [&](const std::string& nvme_path) {
    return run_name.empty() ? nvme_path : (std::filesystem::path(nvme_path) / run_name).string();
  };
  p.optimizer_residence = at.optimizer;
  p.param_residence = at.param;
  if (medium_of(at.optimizer) == Medium::files) p.swap.dir = folder(zero.offload_optimizer.nvme_path);
  if (medium_of(at.param) == Medium::files) p.swap.param_dir = folder(zero.offload_param.nvme_path);
  if (zero.sub_group_size > 0) p.swap.tile_elems = zero.sub_group_size;
  p.swap.buffers = int(zero.offload_optimizer.buffer_count);
  p.swap.block_bytes = aio.block_size;
  p.swap.queue_depth = int(aio.queue_depth);
  p.swap.single_submit = aio.single_submit;
  p.swap.overlap_events = aio.overlap_events;
}

int64_t Plan::numel() const {
  int64_t n = 0;
  for (auto& b : buffers) n += b.numel;
  return n;
}

int64_t Plan::padded() const {
  int64_t n = 0;
  for (auto& b : buffers) n += b.padded;
  return n;
}

Range Plan::optim_range(size_t b, int rank) const {
  const int64_t p = buffers.at(b).padded;
  return policy.shard_optimizer() ? shard_range(p, world, rank) : Range{0, p};
}

MemoryEstimate Plan::memory() const {
  const int64_t pb = int64_t(dtype_size(policy.param_dtype)), ab = int64_t(dtype_size(policy.grad_accum_dtype));
  const int64_t cb = policy.widens() ? int64_t(dtype_size(policy.compute_dtype)) : 0;  // Note [f32 compute]
  MemoryEstimate e;
  for (size_t i = 0; i < buffers.size(); ++i) {
    const int64_t p = buffers[i].padded, s = p / world, o = policy.shard_optimizer() ? s : p;
    const bool kept = i < persistent.size() && persistent[i];
    e.param += param_swapped(i) ? 0 : pb * (policy.shard_parameters() ? s + (kept ? p : 0) : p);
    e.param += cb * (policy.shard_parameters() ? (kept ? p : 0) : p);  // the widened copy of what stays gathered
    e.host += param_on_host(i) ? pb * s : 0;  // Note [host residence]: the shard, in pinned host memory
    e.grad += policy.grads_to_host ? 0 : ab * (policy.shard_gradients() ? s : p);  // Note [host gradient shard]
    e.master += policy.fp32_master ? 4 * o : 0;
    e.optim += optim_state_bytes_per_elem * o;
  }
  const ResidenceTier& tier = tier_of(policy.optimizer_residence);
  if (tier.account) tier.account(*this, e);  // Note [residence tiers]: as the tier keeps them
  if (!policy.device.is_cpu() && tier.medium != Medium::compute) {  // Note [host residence]
    if (policy.snapshot_host_update) {  // Note [host update overlap]: the snapshot of the states and parameters
      e.optim += e.master + e.optim;
      for (size_t i = 0; i < buffers.size(); ++i)
        e.optim += int64_t(dtype_size(policy.param_dtype)) * optim_range(i, 0).size();
    }
    e.optim += host_staging_bytes();
    e.host += e.master + e.optim;  // the tile buffers or the states, and the staging shards, beside the device
  }
  return e;
}

int64_t Plan::swap_tile_elems() const {
  int64_t largest = 0;
  for (size_t b = 0; b < buffers.size(); ++b)
    largest = std::max(largest, policy.shard_optimizer() ? buffers[b].padded / world : buffers[b].padded);
  const int64_t t = std::min(policy.swap.tile_elems, largest);
  return std::max<int64_t>(1024, (t + 1023) / 1024 * 1024);  // whole 4 KiB pages of f32
}

int64_t Plan::swap_slot_bytes() const {
  const int64_t states = (policy.fp32_master ? 1 : 0) + optim_state_bytes_per_elem / 4;
  return states * swap_tile_elems() * 4 + 4096;  // + the slack that aligns it for O_DIRECT
}

int64_t Plan::checkpoint_bytes() const {
  const int64_t per_elem =
      int64_t(dtype_size(policy.param_dtype)) + (policy.fp32_master ? 4 : 0) + optim_state_bytes_per_elem;
  int64_t n = 0;
  for (auto& b : buffers) n += b.padded / world;
  return n * per_elem;
}

int64_t Plan::host_staging_bytes() const {
  if (policy.device.is_cpu() || policy.optimizer_medium() == Medium::compute) return 0;
  int64_t bytes = 0;  // each buffer's gradient shard, and its parameter shard where that is on the device
  for (size_t b = 0; b < buffers.size(); ++b) {
    const int64_t n = policy.shard_optimizer() ? buffers[b].padded / world : buffers[b].padded;
    bytes += n * int64_t(dtype_size(policy.grad_accum_dtype));
    if (!param_on_host(b) && !param_swapped(b)) bytes += n * int64_t(dtype_size(policy.param_dtype));
  }
  return bytes;
}

bool Plan::param_swapped(size_t b) const {
  return policy.shard_parameters() && policy.param_medium() == Medium::files && !persistent.at(b);
}

bool Plan::param_on_host(size_t b) const {
  return policy.shard_parameters() && policy.param_medium() == Medium::host && !persistent.at(b);
}

int64_t Plan::param_tile_elems() const {
  int64_t largest = 0;
  for (size_t b = 0; b < buffers.size(); ++b)
    if (param_swapped(b)) largest = std::max(largest, buffers[b].padded / world);
  const int64_t page = 4096 / int64_t(dtype_size(policy.param_dtype)), t = std::min(policy.swap.tile_elems, largest);
  return std::max(page, (t + page - 1) / page * page);
}

int64_t Plan::param_staging_bytes(size_t b) const {
  const int64_t tile = param_tile_elems(), tiles = (buffers.at(b).padded / world + tile - 1) / tile;
  return tiles * tile * int64_t(dtype_size(policy.param_dtype)) + 4096;  // + the O_DIRECT alignment slack
}

namespace {
bool flagged(const std::vector<bool>& flags, size_t i) { return i < flags.size() && flags[i]; }  // empty: none
}  // namespace

// Note [gradient buckets]: at stages 2-3 a bucket's full gradient lives from its first gradient
// until its reduce-scatter completes, beside the sharded states; a bucket as large as DeepSpeed's
// default reduce_bucket_size (5e8) would hold the whole model's gradient and make stage 2 peak
// above stage 1. So there a bucket holds at most the largest parameter (at least 1M elements),
// whatever reduce_bucket_size says, and one bucket's worth reduces at a time by default: each
// gradient is reduced and freed about as soon as its layer's backward is done.
namespace {
int64_t gradient_bucket_elems(const PlanInput& in, const Policy& policy) {
  if (!policy.shard_gradients()) return in.reduce_bucket_size;
  int64_t largest = int64_t(1) << 20;
  for (int64_t n : in.numels) largest = std::max(largest, n);
  return std::min(in.reduce_bucket_size, largest);
}
}  // namespace

Plan make_plan(const PlanInput& in, const Policy& policy, int world) {
  Plan plan;
  plan.policy = policy;
  plan.world = world;
  plan.optim_state_bytes_per_elem = in.optim_state_bytes_per_elem;
  plan.grad_bucket_elems = gradient_bucket_elems(in, policy);
  if (policy.shard_parameters()) {
    plan.buffers = plan_units(in.numels, in.units, world);
    for (auto& b : plan.buffers) plan.persistent.push_back(b.numel <= in.persistence_threshold);
  } else {
    std::vector<bool> solo(in.numels.size());
    for (size_t i = 0; i < solo.size(); ++i) solo[i] = flagged(in.sparse, i) || flagged(in.tied_rows, i);
    plan.buffers = plan_buckets(in.numels, plan.grad_bucket_elems, world, solo);
    plan.persistent.assign(plan.buffers.size(), false);
    for (auto& b : plan.buffers) b.tied_rows = b.params.size() == 1 && flagged(in.tied_rows, b.params[0].index);
  }
  // A stage-3 unit holding a sparse-eligible parameter beside others (an embedding inside a unit
  // marked as one) reduces it densely: the rows of one parameter cannot stand for the whole buffer.
  for (auto& b : plan.buffers) {
    b.sparse = b.params.size() == 1 && flagged(in.sparse, b.params[0].index);
    for (const ParamSlot& s : b.params) b.shared = b.shared || flagged(in.shared, s.index);
  }
  // Note [gradient blocks]: where each pass reduces its own gradient (stages 2-3) densely, a
  // buffer whose first parameter is larger than reduce_bucket_size (and the others not: a weight
  // and its bias) never exists whole as a gradient: rounds of about reduce_bucket_size elements,
  // 1/N of them for each rank's shard (with gradients sent to the host, a shard made for the pass
  // and handed down whole: Note [host gradient shard]).
  if (policy.reduce_every_micro_batch() && policy.wire.gradient_bits == 0)
    for (auto& b : plan.buffers) {
      bool one_large = b.params.at(0).numel > in.reduce_bucket_size;
      for (size_t i = 1; i < b.params.size(); ++i) one_large = one_large && b.params[i].numel <= in.reduce_bucket_size;
      if (!one_large || b.sparse || b.tied_rows) continue;
      b.block_elems = std::min(b.padded / world, std::max<int64_t>(1, in.reduce_bucket_size / world));
      for (const ParamSlot& s : b.params)  // each gradient's whole rows (grad_blocks.cpp)
        b.block_rows_elems +=
            block_rows_elems(s.numel, s.index < in.row_elems.size() ? in.row_elems[s.index] : 1, b.block_elems);
    }
  return plan;
}

int64_t max_params_that_fit(int64_t bytes, const Policy& policy, int world, int64_t k) {
  // Bytes per parameter as a + b/N, from the same terms as Plan::memory.
  const double n = world, pb = double(dtype_size(policy.param_dtype)), ab = double(dtype_size(policy.grad_accum_dtype));
  const double o = double(k) + (policy.fp32_master ? 4.0 : 0.0);
  const double per = (policy.shard_parameters() ? pb / n : pb) + (policy.shard_gradients() ? ab / n : ab) +
                     (policy.shard_optimizer() ? o / n : o);
  const double fit = double(bytes) / per;  // clamped: a huge budget over many ranks overflows int64
  return fit >= 9.2e18 ? std::numeric_limits<int64_t>::max() : int64_t(fit);
}

}  // namespace zt::zero
