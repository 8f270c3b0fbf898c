// Note [parameter swap]: with offload_param.device = nvme (swap files, stage 3) each unit
// that is not persistent keeps its parameter shard in a swap file <dir>/p<unit>.swap instead of
// memory, in records of Plan::param_tile_elems() elements: the file tier of Note [residence],
// read in and written back whole. The prefetcher starts reading a unit's
// shard one prefetch before it launches the unit's all-gather, so the read runs behind the
// computation of the unit before; the shard is freed once the all-gather completes. The
// optimizer reads a shard in, updates it and writes it back (publish), one unit at a time, so
// RAM holds the persistent units plus the shards being gathered or updated (Plan::memory()).
// With offload_param.device = cpu on a device (Note [host residence]) a non-persistent unit's
// shard lives in pinned host memory; there, and for a swapped shard read in on a device, each
// all-gather uploads the host shard first (freed when the gather completes), and the host's
// optimizer updates it in place.
#include "param_store.h"

#include <algorithm>
#include <cstring>

#include "residence.h"
#include "swap_file.h"
#include "zt/ops/compress.h"
#include "zt/ops/ops.h"
#include "zt/zero/schedule.h"

namespace zt::zero {

ParamStore::ParamStore(const Plan& plan, std::vector<Tensor> params, const CommGroups& groups, Stage3Limits limits,
                       const Materialize& materialize)
    : plan_(plan),
      params_(std::move(params)),
      group_(*groups.all),
      groups_(groups),
      limits_(limits),
      materialize_(materialize),
      units_(plan, Span::unit, true) {
  const Policy& pol = plan_.policy;
  const size_t nb = plan_.buffers.size();
  bufs_.resize(nb);
  for (size_t b = 0; b < nb; ++b) bufs_[b].own = shard_range(plan_.buffers[b].padded, plan_.world, group_.rank());
  if (!pol.shard_parameters()) {
    for (size_t b = 0; b < nb; ++b) {
      {
        TagScope tag(MemTag::param);
        bufs_[b].full = Tensor::zeros({plan_.buffers[b].padded}, pol.param_dtype, pol.device);
      }
      for (auto& s : plan_.buffers[b].params)
        materialize(params_[s.index], 0, bufs_[b].full.slice(0, s.offset, s.offset + s.numel));
      bind(b);
    }
    return;
  }
  const bool swap = pol.param_medium() == Medium::files;
  if (swap) swap_dir_ = make_swap_folder(pol.swap.param_dir.empty() ? pol.swap.dir : pol.swap.param_dir, group_.rank());
  for (size_t b = 0; b < nb; ++b) {  // stage 3: each rank fills only its shard (a persistent unit whole)
    Buf& buf = bufs_[b];
    if (plan_.persistent[b]) {
      TagScope tag(MemTag::param);
      buf.full = Tensor::zeros({plan_.buffers[b].padded}, pol.param_dtype, pol.device);
      write_initial(b, buf.full, {0, plan_.buffers[b].padded}, materialize);
    }
    if (plan_.param_swapped(b)) {
      const int64_t tile = plan_.param_tile_elems();
      // Note [residence]: the file tier, one tensor read and written whole (no tile buffers).
      buf.swap.file = file_residence(swap_dir_ + "/p" + std::to_string(b) + ".swap", buf.own.size(), 1,
                                     {nullptr, tile, pol.swap, pol.param_dtype}, nullptr);
      const auto& ps = plan_.buffers[b].params;
      auto held = [&](const auto& s) { return params_[s.index].has_storage(); };
      if (!buf.full.defined() && std::none_of(ps.begin(), ps.end(), held)) {
        buf.swap.fresh = true;  // Note [fresh swap files]: the initialisers' values, computed when read
        unbind(b);
        continue;
      }
      Tensor staged = staging(b);
      staged.zero_();  // the padding and the last record's tail
      buf.shard = staged.slice(0, 0, buf.own.size());
    } else {  // Note [residence tiers]: in the memory of its tier (a persistent unit's: the device's)
      const ResidenceTier& tier = plan_.param_on_host(b) ? tier_of(pol.param_residence) : memory_tier();
      buf.shard = tier.zeros(buf.own.size(), pol.param_dtype, pol.device, MemTag::param);
    }
    if (buf.full.defined())
      buf.shard.copy_(buf.full.slice(0, buf.own.begin, buf.own.end));
    else
      write_initial(b, buf.shard, buf.own, materialize);
    if (buf.swap.file) stage_out(b);
    if (buf.full.defined())
      bind(b);
    else
      unbind(b);
  }
}

ParamStore::~ParamStore() = default;

Tensor ParamStore::staging(size_t b) const {
  TagScope tag(MemTag::param);
  return page_aligned(plan_.param_staging_bytes(b) - 4096, plan_.policy.param_dtype);
}

void ParamStore::stage_in(size_t b, bool wait) {
  Buf& buf = bufs_[b];
  if (!buf.shard.defined() && buf.swap.fresh) {  // Note [fresh swap files]: computed, not read
    const Tensor staged = staging(b);
    buf.shard = staged.slice(0, 0, buf.own.size());
    staged.slice(0, buf.own.size(), staged.numel()).zero_();  // the last record's tail
    write_initial(b, buf.shard, buf.own, materialize_);
  }
  if (!buf.shard.defined()) {
    const Tensor staged = staging(b);
    buf.swap.file->start_read(staged.raw_data());
    buf.swap.reading = true;
    buf.shard = staged.slice(0, 0, buf.own.size());
  }
  if (wait && buf.swap.reading) {
    buf.swap.file->finish_read();
    buf.swap.reading = false;
  }
}

void ParamStore::stage_out(size_t b) {
  Buf& buf = bufs_[b];
  ZT_ASSERT(buf.shard.defined() && !buf.swap.reading, "parameter swap of unit ", b, " written back while not read in");
  buf.swap.file->write_whole(buf.shard.raw_data());
  buf.swap.fresh = false;
  buf.shard = Tensor();
}

void ParamStore::write_initial(size_t b, Tensor dst, Range range, const Materialize& materialize) const {
  for (auto& s : plan_.buffers[b].params) {
    const Range mine = intersect(range, {s.offset, s.offset + s.numel});
    if (!mine.empty())
      materialize(params_[s.index], mine.begin - s.offset,
                  dst.slice(0, mine.begin - range.begin, mine.end - range.begin));
  }
}

// Note [f32 compute]: where a 16-bit run's products take the f32 path (no 16-bit kernel, or one
// not 10% faster than f32 on this processor), widening operands per product costs more than 16 bits save.
// The model's parameters then view an f32 copy of each gathered buffer, widened once per gather
// (stages 0-2: once per step, this rank's range by the update itself, Note [widened by the update]
// in ops/cpu/update.cpp, the rest after the publish) and the model computes in f32; the gathers, the
// published values, gradients on the wire and the saved weights stay in the param dtype. Backward's
// f32 gradients round once as they accumulate into the 16-bit gradient buffers.
void ParamStore::bind(size_t b) {
  Buf& buf = bufs_[b];
  const Policy& pol = plan_.policy;
  if (pol.widens()) {
    if (!buf.compute.work.defined()) {
      TagScope tag(MemTag::param);
      buf.compute.work = Tensor::empty({plan_.buffers[b].padded}, pol.compute_dtype, pol.device);
    }
    ops::cast_into(buf.compute.work, buf.full);
  }
  const Tensor& t = pol.widens() ? buf.compute.work : buf.full;
  for (auto& s : plan_.buffers[b].params) params_[s.index].rebind(t.storage(), t.offset() + s.offset, t.dtype());
}

void ParamStore::unbind(size_t b) {
  for (auto& s : plan_.buffers[b].params) params_[s.index].release_storage();
  bufs_[b].compute.work = Tensor();
}

void ParamStore::refresh_compute(bool after_update) {
  for (size_t b = 0; b < bufs_.size(); ++b) {
    Buf& buf = bufs_[b];
    if (!buf.compute.work.defined()) continue;
    if (!std::exchange(buf.compute.by_update, false) || !after_update) {
      ops::cast_into(buf.compute.work, buf.full);
      continue;
    }
    const Range r = plan_.optim_range(b, group_.rank());  // the rest came in with the publish
    for (const Range& part : {Range{0, r.begin}, Range{r.end, plan_.buffers[b].padded}}) {
      if (part.empty()) continue;
      Tensor dst = buf.compute.work.slice(0, part.begin, part.end);
      ops::cast_into(dst, buf.full.slice(0, part.begin, part.end));
    }
  }
}

Tensor ParamStore::full_param(size_t b, size_t index) const {
  for (auto& s : plan_.buffers[b].params)
    if (s.index == index) return bufs_[b].full.slice(0, s.offset, s.offset + s.numel).view(params_[index].shape());
  ZT_THROW_AS(ErrorKind::internal, "[zero] parameter ", index, " is not in buffer ", b);
}

Tensor ParamStore::owned(size_t b) {
  Buf& buf = bufs_[b];
  if (buf.swap.file) {
    stage_in(b, true);
    buf.swap.updating = true;
  }
  if (plan_.policy.shard_parameters()) return buf.shard;
  const Range r = plan_.optim_range(b, group_.rank());
  return buf.full.slice(0, r.begin, r.end);
}

Tensor ParamStore::owned_compute(size_t b) {
  const Buf& buf = bufs_[b];
  if (!buf.compute.work.defined() || buf.swap.file || plan_.policy.shard_parameters()) return Tensor();
  const Range r = plan_.optim_range(b, group_.rank());
  return buf.compute.work.slice(0, r.begin, r.end);
}

Tensor ParamStore::owned_copy(size_t b) {
  Buf& buf = bufs_[b];
  if (!buf.swap.file) return owned(b);
  if (buf.shard.defined()) {
    stage_in(b, true);
    TagScope tag(MemTag::workspace);
    return buf.shard.clone();
  }
  stage_in(b, true);
  return std::exchange(buf.shard, Tensor());
}

ShardTensor ParamStore::owned_state(size_t b) {
  Buf& buf = bufs_[b];
  if (!buf.swap.file) return ShardTensor::in_memory("param", owned(b));
  ZT_ASSERT(!buf.swap.updating && !buf.gather.work, "checkpoint of unit ", b, " while its swapped shard is in use");
  if (buf.swap.fresh) {  // a save reads the file and a load writes it: its records written first
    stage_in(b, true);
    stage_out(b);
  }
  if (buf.shard.defined()) {  // a read-ahead copy: the file is what a load must change
    stage_in(b, true);
    buf.shard = Tensor();
  }
  return buf.swap.file->tensor(0, "param");
}

void ParamStore::publish(size_t b, const std::string& label) {
  Buf& buf = bufs_[b];
  const Policy& pol = plan_.policy;
  buf.gather.secondary = Tensor();  // the parameters change
  if (pol.shard_optimizer() && (!pol.shard_parameters() || buf.full.defined())) {
    comm::CollOptions o;
    o.label = label;
    if (pol.shard_parameters()) {             // a gathered unit: kept (quantized as a training gather) or persistent
      if (buf.gather.work) finish_gather(b);  // a prefetch still in flight (a load's refresh)
      if (buf.swap.file) stage_in(b, true);
      buf.gather.training = true;  // the next step uses these values: hpZ keeps its piece of them
      launch_gather(b, quantized_weights() && !plan_.persistent[b] ? Source::quantized : Source::exact, label);
      finish_gather(b);
    } else {
      // Note [publish behind the update]: one all-gather in flight, the previous buffer's, which
      // ran behind this buffer's update; its input copy is freed before this one is made.
      finish_publish();
      TagScope tag(MemTag::comm);  // the collective's input must not alias its output
      buf.publish.in = buf.full.slice(0, buf.own.begin, buf.own.end).clone();
      buf.publish.work = group_.all_gather_async(buf.publish.in, buf.full, o);
      publishing_ = b;
    }
  }
  if (buf.swap.file && buf.swap.updating) {
    buf.swap.updating = false;
    stage_out(b);
  } else if (buf.swap.file && buf.shard.defined() && !buf.gather.work) {  // a read-ahead may predate a load
    stage_in(b, true);
    buf.shard = Tensor();
  }
}

void ParamStore::finish_publish() {
  if (publishing_ == kNone) return;
  Buf& buf = bufs_[std::exchange(publishing_, kNone)];
  buf.publish.work->wait();
  buf.publish.work = nullptr;
  buf.publish.in = Tensor();
}

void ParamStore::gather(size_t b, bool wait, const std::string& label) {
  Buf& buf = bufs_[b];
  if (buf.full.defined() && !training_pass_ &&
      !buf.gather.exact) {  // kept with qwZ's values: consolidation reads exact ones
    if (buf.gather.work) finish_gather(b);
    if (buf.swap.file) stage_in(b, true);
    launch_gather(b, Source::exact, label);
    finish_gather(b);
    bind(b);  // Note [f32 compute]: the widened copy follows the exact values
  }
  if (!buf.full.defined()) {
    const Source src = !training_pass_                  ? Source::exact
                       : buf.gather.secondary.defined() ? Source::secondary
                       : quantized_weights()            ? Source::quantized
                                                        : Source::exact;
    if (buf.swap.file && src != Source::secondary) stage_in(b, true);  // the read a prefetch started, or one now
    units_.open(b);  // Note [step schedule]: the gathered unit, and whatever else a unit's span makes
    buf.full = units_.made(b, "gathered unit");
    ZT_ASSERT(buf.full.defined(), "unit ", b, " gathered without a buffer");
    buf.gather.training = training_pass_;
    launch_gather(b, src, label);
    ++gathers_;
  }
  if (wait && buf.gather.work) {
    finish_gather(b);
    bind(b);
  }
  if (wait && plan_.policy.shard_parameters() && !plan_.persistent[b]) note_use(b);
}

void ParamStore::launch_gather(size_t b, Source src, const std::string& label) {
  Buf& buf = bufs_[b];
  ZT_ASSERT(!buf.gather.work, "unit ", b, " gathered again while its gather is in flight");
  comm::CollOptions o;
  o.label = label;
  buf.gather.exact = src == Source::exact || !quantized_weights();  // pieces hold what a quantized gather brought
  if (src == Source::secondary) {
    buf.gather.work = groups_.secondary->all_gather_async(buf.gather.secondary, buf.full, o);
    return;
  }
  Tensor shard = buf.shard;
  if (shard.device() != buf.full.device()) {  // Note [host residence]: up first, freed once gathered
    buf.gather.uploaded = Tensor::empty(shard.shape(), shard.dtype(), MemTag::comm, buf.full.device());
    buf.gather.uploaded.copy_(shard);
    shard = buf.gather.uploaded;
  }
  if (src == Source::quantized) {
    TagScope tag(MemTag::comm);
    const int64_t words = ops::packet_words(buf.own.size(), 8);
    buf.gather.packet = Tensor::empty({words}, DType::i32, shard.device());
    buf.gather.packets = Tensor::empty({plan_.world * words}, DType::i32, shard.device());
    ops::quantize_into(shard, 8, buf.gather.packet);
    buf.gather.work = group_.all_gather_async(buf.gather.packet, buf.gather.packets, o);
  } else {
    buf.gather.work = group_.all_gather_async(shard, buf.full, o);
  }
}

void ParamStore::finish_gather(size_t b) {
  Buf& buf = bufs_[b];
  buf.gather.work->wait();
  overlap_.add(*buf.gather.work);
  buf.gather.work = nullptr;
  buf.gather.uploaded = Tensor();
  if (buf.swap.file && !buf.swap.updating) buf.shard = Tensor();  // the file still holds it
  if (buf.gather.packets.defined()) {  // qwZ: every rank decodes every slice alike, its own too
    const int64_t n = buf.own.size(), words = buf.gather.packet.numel();
    for (int r = 0; r < plan_.world; ++r)
      ops::dequantize_into(buf.gather.packets.slice(0, r * words, (r + 1) * words), 8,
                           buf.full.slice(0, r * n, (r + 1) * n));
    buf.gather.packet = buf.gather.packets = Tensor();
  }
  if (groups_.secondary && buf.gather.training && !plan_.persistent[b] && !buf.gather.secondary.defined()) {  // hpZ
    const int P = groups_.secondary->size(), i = groups_.secondary->rank();
    const int64_t piece = plan_.buffers[b].padded / P;
    TagScope tag(MemTag::param);
    buf.gather.secondary = buf.full.slice(0, i * piece, (i + 1) * piece).clone();
  }
}

void ParamStore::release(size_t b, bool may_keep) {
  Buf& buf = bufs_[b];
  if (!plan_.policy.shard_parameters() || plan_.persistent[b] || !buf.full.defined()) return;
  if (may_keep && may_stay(b)) {
    if (buf.gather.work) {  // a prefetched unit this pass never used: the step must not race its gather
      finish_gather(b);
      bind(b);
    }
    return;
  }
  if (buf.gather.work) finish_gather(b);
  unbind(b);
  buf.full = Tensor();
  units_.close(b);
}

// Note [reuse distance]: as DeepSpeed, a unit is not released when the trace says it is used again
// within stage3_max_reuse_distance elements of other units' uses (GPT-2's tied wte, a unit whose
// checkpointed forward is recomputed for its backward, the next micro-batch's first unit), as
// long as the gathered units, with the next one the trace needs, stay within
// stage3_max_live_parameters ("resident before releasing"). The trace is the first step's order
// of uses in training passes (an evaluation forward neither follows it nor keeps units); a step
// that departs from it releases as usual until the next step begins.
void ParamStore::note_use(size_t b) {
  if (!training_pass_) return;
  if (recording_) {
    trace_.push_back(b);
  } else if (following_) {
    following_ = cursor_ < trace_.size() && trace_[cursor_] == b;
    ++cursor_;
  }
}

bool ParamStore::may_stay(size_t b) const {
  if (!training_pass_ || !following_ || !reused_within(plan_, trace_, cursor_, b, limits_.max_reuse_elems))
    return false;
  int64_t next = 0;  // the unit the trace needs next, when it is not gathered yet
  if (cursor_ < trace_.size() && !bufs_[trace_[cursor_]].full.defined()) next = plan_.buffers[trace_[cursor_]].padded;
  return live_elems() + next <= limits_.max_live_elems;
}

void ParamStore::end_step() {
  training_pass_ = false;                     // until the next forward: consolidation gathers exactly
  recording_ = recording_ && trace_.empty();  // a step that gathered nothing does not make the trace
  following_ = !recording_;
  cursor_ = 0;
  for (size_t b = 0; b < bufs_.size(); ++b)  // the update must not race a gather nobody waited for
    if (bufs_[b].gather.work) {
      finish_gather(b);
      bind(b);
    }
}

int64_t ParamStore::live_elems() const {
  int64_t live = 0;
  for (size_t i = 0; i < bufs_.size(); ++i)
    if (bufs_[i].full.defined() && !plan_.persistent[i]) live += plan_.buffers[i].padded;
  return live;
}

// Swapped units (Note [parameter swap]) are read at one prefetch and all-gathered at the next.
void ParamStore::prefetch(size_t b, int dir, const std::string& label) {
  auto gathered = [&](size_t u) { return bufs_[u].full.defined(); };
  for (size_t u : prefetch_window(plan_, limits_, b, dir, live_elems(), gathered)) {  // Note [step schedule]
    const bool from_pieces = training_pass_ && bufs_[u].gather.secondary.defined();   // hpZ: no shard needed
    if (bufs_[u].swap.file && !bufs_[u].shard.defined() && !from_pieces)
      stage_in(u, false);
    else
      gather(u, false, label);
  }
}

SwapStats ParamStore::swap_stats() const {
  SwapStats st;
  for (const Buf& b : bufs_)
    if (b.swap.file) st += b.swap.file->stats();
  return st;
}

}  // namespace zt::zero
