// Note [optimizer swap]: with offload_optimizer.device = nvme (Residence::file) each flat
// buffer's fp32 master and optimizer states live in a swap file <dir>/b<buffer>.swap, tile by
// tile: record t holds elements [tT, (t+1)T) of the master (16-bit runs) and then of each
// state, T a multiple of 1024 so a record is whole 4 KiB pages. An update streams the records
// through `buffers` tile buffers: the next tiles are read (buffers - 2 of them, at least one)
// while tile i is updated by the same stateless kernel as in memory, and tile i-1 is written.
// The kernel is element-wise, so the trajectory is the in-memory one bit for bit; RAM holds
// only the tile buffers (Plan::memory()). Every record is checked against the xxh64 it was
// written with.
//
// Note [host residence]: with offload_optimizer.device = cpu on a device (ZeRO-Offload), the
// fp32 master and optimizer states live in pinned host memory and the host's kernel updates
// them: each tile of swap_tile_elems() gradients comes down through a pinned staging tile, the
// host update writes the master and the rounded parameter into a pinned parameter tile (fp32 runs
// without a master bring the parameter down first), and that tile goes up. The update is the
// same element-wise kernel, so the trajectory is the in-memory one bit for bit. Swap files on a
// device (offload_optimizer.device = nvme, ZeRO-Infinity) stage each tile the same way.
#include "optim_shard.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "swap_file.h"
#include "zt/ops/ops.h"

namespace zt::zero {

OptimShard::OptimShard(const Plan& plan, const config::OptimizerConfig& spec, int rank,
                       const std::function<Tensor(size_t)>& initial)
    : spec_(spec), initial_(initial), names_(optim::state_names(spec)), master_(plan.policy.fp32_master) {
  optim::validate(spec_);
  const bool file = plan.policy.optimizer_residence == Residence::file;
  const bool host = plan.policy.optimizer_residence == Residence::host;
  if (plan.host_staging_bytes() > 0) {  // Note [host residence]: the tiles through which a device's update goes
    tile_ = plan.swap_tile_elems();
    stage_param_ = pinned_zeros(tile_, plan.policy.param_dtype, MemTag::optim);
    stage_grad_ = pinned_zeros(tile_, plan.policy.grad_accum_dtype, MemTag::optim);
  }
  if (file) {
    dir_ = make_swap_folder(plan.policy.swap.dir, rank);
    tile_ = plan.swap_tile_elems();
    TagScope tag(MemTag::optim);
    for (int s = 0; s < plan.policy.swap.buffers; ++s)
      slots_.push_back(page_aligned(plan.swap_slot_bytes() - 4096, DType::f32));
  }
  const int64_t k = (master_ ? 1 : 0) + int64_t(names_.size());
  for (size_t b = 0; b < plan.buffers.size(); ++b) {
    Buf buf;
    buf.numel = plan.optim_range(b, rank).size();
    if (host) {
      buf.host = true;
      if (master_) {
        buf.master = pinned_zeros(buf.numel, DType::f32, MemTag::master);
        buf.master.copy_(initial(b));  // set-up: the converting copy stages through the host
      }
      for (size_t i = 0; i < names_.size(); ++i) buf.states.push_back(pinned_zeros(buf.numel, DType::f32, MemTag::optim));
    } else if (!file) {
      if (master_) {
        TagScope tag(MemTag::master);
        buf.master = ops::cast(initial(b), DType::f32);
      }
      TagScope tag(MemTag::optim);
      for (size_t i = 0; i < names_.size(); ++i)
        buf.states.push_back(Tensor::zeros({buf.numel}, DType::f32, plan.policy.device));
    } else {
      const std::string path = dir_ + "/b" + std::to_string(b) + ".swap";
      const int64_t tiles = (buf.numel + tile_ - 1) / tile_;
      buf.file = std::make_unique<SwapFile>(path, tiles, size_t(k * tile_ * 4), int(slots_.size()), plan.policy.swap);
      buf.fresh = true;
    }
    bufs_.push_back(std::move(buf));
  }
}

OptimShard::~OptimShard() = default;

// Note [fresh swap files]: a swap file's records are first written by the buffer's first update,
// which fills each tile buffer with the initial master (the working parameters, not yet updated)
// and zero states instead of reading it: start-up writes nothing, and step 1 reads nothing. A
// checkpoint of a fresh buffer reads those values the same way; a load writes the file whole first.
// Parameter files (param_store.cpp) start fresh too where the values are initialisers': each
// read of such a shard computes it (Note [counter init]) until its first update writes the file.
void OptimShard::write_initial(Buf& buf, size_t b) {
  const Tensor init = initial_(b);
  run_tiles(
      buf,
      [&](int64_t t, int64_t len, Tensor rec) { fresh_record(rec, init.slice(0, t * tile_, t * tile_ + len)); },
      /*read_first=*/false);
  buf.fresh = false;
}

void OptimShard::fresh_record(Tensor rec, const Tensor& params) const {
  rec.zero_();  // fresh states, and zeros past the last element
  if (master_) rec.slice(0, 0, params.numel()).copy_(params);
}

// Tiles of `buf` in order through the tile buffers: the next tiles are read (read_first) while
// fn updates tile i, whose write then goes out behind it.
void OptimShard::run_tiles(Buf& buf, const std::function<void(int64_t, int64_t, Tensor)>& fn, bool read_first) {
  SwapFile& f = *buf.file;
  const int S = int(slots_.size());
  const int64_t tiles = (buf.numel + tile_ - 1) / tile_;
  auto start_read = [&](int64_t t) {
    const int s = int(t % S);
    f.wait(s);  // the write that last used this buffer
    f.read(t, slot(s), s);
  };
  // Reads run `ahead` tiles in front of the update, so the disk always has a read queued; one
  // buffer is being updated and one written behind (S = 2, 3: one ahead; S = 1: none).
  const int64_t ahead = std::max(1, S - 2);
  if (read_first)
    for (int64_t t = 0; t < std::min(S > 1 ? ahead : 1, tiles); ++t) start_read(t);
  for (int64_t t = 0; t < tiles; ++t) {
    const int s = int(t % S);
    f.wait(s);
    if (read_first && S > 1 && t + ahead < tiles) start_read(t + ahead);
    const auto t0 = std::chrono::steady_clock::now();
    fn(t, std::min(tile_, buf.numel - t * tile_), slots_[size_t(s)]);
    compute_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    f.write(t, slot(s), s);
    if (read_first && S == 1 && t + 1 < tiles) start_read(t + 1);
  }
  f.wait_all();
}

void OptimShard::update(size_t b, const Tensor& params, const Tensor& grads, float lr, float grad_scale) {
  Buf& buf = bufs_[b];
  optim::UpdateArgs a;
  a.lr = lr;
  a.step = steps_ + 1;
  a.grad_scale = grad_scale;
  if (buf.host) {  // Note [host residence]: tile by tile, through the staging tiles
    for (int64_t begin = 0; begin < buf.numel; begin += tile_) {
      const int64_t len = std::min(tile_, buf.numel - begin);
      stage_down(params, grads, begin, len, a);
      a.master = master_ ? buf.master.slice(0, begin, begin + len) : Tensor();
      a.states.clear();
      for (const Tensor& s : buf.states) a.states.push_back(s.slice(0, begin, begin + len));
      timed_update(a);
      stage_up(params, begin, len);
    }
    return;
  }
  if (!buf.file) {
    a.param = params;
    a.master = buf.master;
    a.grad = grads;
    a.states = buf.states;
    optim::update(spec_, a);
    return;
  }
  const int64_t k = (master_ ? 1 : 0) + int64_t(names_.size());
  const bool fresh = buf.fresh;
  run_tiles(
      buf,
      [&](int64_t t, int64_t len, Tensor rec) {
        const int64_t begin = t * tile_;
        auto view = [&](int64_t j) { return rec.slice(0, j * tile_, j * tile_ + len); };  // tensor j of the tile
        if (fresh) fresh_record(rec, params.slice(0, begin, begin + len));  // what write_initial would write
        stage_down(params, grads, begin, len, a);
        a.master = master_ ? view(0) : Tensor();
        a.states.clear();
        for (int64_t j = master_ ? 1 : 0; j < k; ++j) a.states.push_back(view(j));
        optim::update(spec_, a);
        stage_up(params, begin, len);
      },
      /*read_first=*/!fresh);
  buf.fresh = false;
}

// a.param and a.grad for elements [begin, begin + len): each its own slice where it is host memory
// (stage 3's parameters with offload_param.device=cpu are), else a staging tile it is copied down
// into (a parameter only in fp32 runs, where it is the weight the rule reads).
void OptimShard::stage_down(const Tensor& params, const Tensor& grads, int64_t begin, int64_t len,
                            optim::UpdateArgs& a) {
  a.param = params.slice(0, begin, begin + len);
  a.grad = grads.slice(0, begin, begin + len);
  if (params.device().is_cpu() && grads.device().is_cpu()) return;
  ZT_ASSERT(stage_grad_.defined() && grads.dtype() == stage_grad_.dtype(), "staged update: gradients in ",
            dtype_name(grads.dtype()), " without a staging tile of that dtype");
  const auto t0 = std::chrono::steady_clock::now();
  if (!grads.device().is_cpu()) {
    a.grad = stage_grad_.slice(0, 0, len);
    a.grad.copy_(grads.slice(0, begin, begin + len));  // waits for backward's last writes
    staging_.bytes_down += uint64_t(a.grad.nbytes());
  }
  if (!params.device().is_cpu()) {
    a.param = stage_param_.slice(0, 0, len);
    if (!master_) a.param.copy_(params.slice(0, begin, begin + len));
    staging_.bytes_down += master_ ? 0 : uint64_t(a.param.nbytes());
  }
  staging_.down_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The updated parameters of the tile go back up (nothing to do where they were updated in place).
void OptimShard::stage_up(const Tensor& params, int64_t begin, int64_t len) {
  if (!stage_param_.defined() || params.device().is_cpu()) return;
  const auto t0 = std::chrono::steady_clock::now();
  params.slice(0, begin, begin + len).copy_(stage_param_.slice(0, 0, len));
  staging_.up_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  staging_.bytes_up += uint64_t(len) * dtype_size(params.dtype());
}

void OptimShard::timed_update(const optim::UpdateArgs& a) {
  const auto t0 = std::chrono::steady_clock::now();
  optim::update(spec_, a);
  compute_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::vector<ShardTensor> OptimShard::state(size_t b) {
  Buf& buf = bufs_[b];
  std::vector<std::string> names;
  if (master_) names.push_back("master");
  names.insert(names.end(), names_.begin(), names_.end());
  std::vector<ShardTensor> out;
  for (size_t j = 0; j < names.size(); ++j) {
    if (!buf.file) {
      out.push_back(
          ShardTensor::in_memory(names[j], master_ && j == 0 ? buf.master : buf.states[j - (master_ ? 1 : 0)]));
      continue;
    }
    ShardTensor t;
    t.name = names[j];
    t.numel = buf.numel;
    auto initial = std::make_shared<Tensor>();  // a fresh master's values, fetched once per state()
    t.read_fn = [this, &buf, b, j, initial](int64_t begin, int64_t n, void* dst) {
      if (!buf.fresh) return swap_range(*buf.file, slot(0), tile_, 4, j, begin, n, dst, nullptr);
      if (master_ && j == 0) {  // Note [fresh swap files]
        if (!initial->defined()) *initial = initial_(b).to(Device::cpu());
        const Tensor v = initial->slice(0, begin, begin + n).to(DType::f32);
        std::memcpy(dst, v.raw_data(), size_t(n) * 4);
      } else {
        std::memset(dst, 0, size_t(n) * 4);
      }
    };
    t.write_fn = [this, &buf, b, j](int64_t begin, int64_t n, const void* src) {
      if (buf.fresh) write_initial(buf, b);
      swap_range(*buf.file, slot(0), tile_, 4, j, begin, n, nullptr, src);
    };
    out.push_back(std::move(t));
  }
  return out;
}

SwapStats OptimShard::swap_stats() const {
  SwapStats st = staging_;
  st.compute_s = compute_s_;
  for (const Buf& b : bufs_)
    if (b.file) st += b.file->stats();
  return st;
}

}  // namespace zt::zero
