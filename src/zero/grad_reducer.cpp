#include "grad_reducer.h"

#include <algorithm>

#include "grad_blocks.h"
#include "sparse_rows.h"
#include "zt/autograd/autograd.h"
#include "zt/ops/ops.h"

namespace zt::zero {

GradReducer::GradReducer(const Plan& plan, std::vector<Tensor> params, const CommGroups& groups,
                         const StepLimits& limits, Callback on_launched, Callback on_final)
    : plan_(plan),
      params_(std::move(params)),
      group_(*groups.all),
      dense_(plan.policy.wire.gradient_bits > 0
                 ? make_quantized_encoder(groups, plan.policy.wire.gradient_bits)
                 : make_dense_encoder(*groups.all, plan.policy.shard_optimizer())),
      overlap_(limits.overlap_comm),
      on_launched_(std::move(on_launched)),
      on_final_(std::move(on_final)),
      flights_(plan, limits, true) {
  const Policy& pol = plan_.policy;
  bufs_.resize(plan_.buffers.size());
  for (size_t b = 0; b < bufs_.size(); ++b) {
    Buf& buf = bufs_[b];
    buf.own = shard_range(plan_.buffers[b].padded, plan_.world, group_.rank());
    if (pol.grads_to_host) {  // Note [host gradient shard]: each step's reduced gradient is handed down
      ZT_CHECK(on_final_ != nullptr, "[zero] gradients sent to the host need their taker (on_final)");
    } else if (pol.shard_gradients()) {
      TagScope tag(MemTag::grad);
      buf.shard = Tensor::zeros({buf.own.size()}, pol.grad_accum_dtype, pol.device);
    } else {
      allocate_full(b);
    }
    if (plan_.buffers[b].sparse || plan_.buffers[b].tied_rows) {  // ag::embedding records its rows from now on
      const Tensor& p = params_[plan_.buffers[b].params.at(0).index];
      ZT_CHECK(p.dim() == 2, "[zero] a sparse gradient needs a [rows, columns] parameter, got ", shape_str(p.shape()));
      autograd::set_sparse_grad(p, true);
      autograd::clear_touched_rows(p);
      buf.rows = make_sparse_rows_encoder(group_, p, plan_.buffers[b].params[0].offset, plan_.buffers[b].padded,
                                          pol.shard_optimizer(), pol.comm_dtype, sparse_bytes_);
      if (plan_.buffers[b].tied_rows)
        autograd::set_grad_partial_hook(p, [this, b](Tensor&, int left) { on_param_partial(b, left); });
    }
    if (plan_.buffers[b].block_elems > 0) {  // Note [gradient blocks]: each use's gradient reduced as made
      buf.stale_rounds.assign(size_t(block_rounds(plan_.buffers[b], plan_.world)), false);
      for (size_t i = 0; i < plan_.buffers[b].params.size(); ++i) {
        const Tensor& p = params_[plan_.buffers[b].params[i].index];
        autograd::set_grad_sink(p, [this, b, i](const Tensor&, const Tensor& g) { take_block_gradient(b, i, g); });
        autograd::add_grad_ready_hook(p, [this, b](Tensor&) { on_param_ready(b); });
      }
      continue;
    }
    for (auto& s : plan_.buffers[b].params) {
      autograd::add_grad_ready_hook(params_[s.index], [this, b](Tensor&) { on_param_ready(b); });
      // Note [lazy gradient buckets]: at stages 2-3 a bucket's full gradient exists only from
      // its first gradient until its reduce-scatter completes, which bounds the peak.
      if (pol.shard_gradients())
        autograd::set_grad_slot_hook(params_[s.index], [this, b](const Tensor&) { open_bucket(b); });
    }
  }
}

GradReducer::~GradReducer() {
  for (auto& p : params_) {
    autograd::clear_grad_ready_hooks(p);
    autograd::set_grad_slot_hook(p, nullptr);
    autograd::set_grad_partial_hook(p, nullptr);
    autograd::set_grad_sink(p, nullptr);
    if (autograd::sparse_grad(p)) {
      autograd::set_sparse_grad(p, false);
      autograd::clear_touched_rows(p);
    }
  }
}

// Note [stale gradient slots]: no pass zeroes a bucket for the next step. Each parameter's slot is
// marked as holding no gradient (autograd's `zeroed`), and its first gradient writes it whole
// (a product, a copy; an embedding zeroes its slot, then adds its rows); a slot no gradient
// reached is zeroed when its bucket launches. Only what no slot covers (alignment gaps, the
// padding) is zeroed where the bucket is made. GPT-2 124M: 124M elements a step not written.
// The same for a stage 2-3 shard: the step's first reduced gradient is written, not added to 0.
void GradReducer::allocate_full(size_t b) {
  Buf& buf = bufs_[b];
  if (buf.full.defined()) return;
  const Policy& pol = plan_.policy;
  const BufferPlan& layout = plan_.buffers[b];
  {
    TagScope tag(pol.shard_gradients() ? MemTag::comm : MemTag::grad);
    buf.full = Tensor::empty({layout.padded}, pol.full_grad_dtype(), pol.device);
  }
  std::vector<Range> slots;
  for (auto& s : layout.params) slots.push_back({s.offset, s.offset + s.numel});
  std::sort(slots.begin(), slots.end(), [](Range x, Range y) { return x.begin < y.begin; });
  int64_t covered = 0;
  slots.push_back({layout.padded, layout.padded});
  for (const Range& r : slots) {
    if (r.begin > covered) buf.full.slice(0, covered, r.begin).zero_();
    covered = std::max(covered, r.end);
  }
  for (auto& s : layout.params) {
    const Tensor& p = params_[s.index];
    autograd::set_grad(p, buf.full.slice(0, s.offset, s.offset + s.numel).view(p.shape()), /*zeroed=*/true);
  }
}

void GradReducer::zero_stale_slots(size_t b) {
  for (auto& s : plan_.buffers[b].params)
    if (autograd::grad_zeroed(params_[s.index])) bufs_[b].full.slice(0, s.offset, s.offset + s.numel).zero_();
}

// Note [step schedule]: the reductions that b's launch will wait for finish before its full
// gradient exists, so the two are never held at once (the gradients it waits on are computed).
void GradReducer::open_bucket(size_t b) {
  if (bufs_[b].full.defined()) return;
  if (reducing_)
    for (size_t f : flights_.admit(b)) finish(f);
  allocate_full(b);
}

void GradReducer::begin_backward(bool boundary, const std::string& label) {
  reducing_ = boundary || plan_.policy.reduce_every_micro_batch();
  boundary_ = boundary;
  label_ = label;
  for (size_t b = 0; b < bufs_.size(); ++b) {
    bufs_[b].pending = int(plan_.buffers[b].params.size());
    bufs_[b].launched = false;
    // Rows of earlier micro-batches are in the dense part already; this pass's rows start empty.
    if (reducing_ && plan_.buffers[b].tied_rows)
      autograd::clear_touched_rows(params_[plan_.buffers[b].params[0].index]);
  }
}

void GradReducer::on_param_ready(size_t b) {
  if (--bufs_[b].pending > 0 || bufs_[b].launched || !reducing_) return;
  launch(b);
}

// Note [tied rows]: a tied embedding weight's gradient is its other uses' dense part (GPT's
// output projection, computed first in backward) plus the rows the embedding touched (last in
// backward). By linearity the average is avg(dense) + avg(rows): the dense part is launched once
// only the embedding's use is left, overlapping the rest of backward, and its buffer zeroed to
// take the rows, which travel as Note [sparse rows] in end_backward. Only when the embedding has
// not run yet in this pass: else the rest would not be rows alone, and it reduces densely.
void GradReducer::on_param_partial(size_t b, int uses_left) {
  const Tensor& p = params_[plan_.buffers[b].params.at(0).index];
  if (!reducing_ || bufs_[b].launched || uses_left != 1 || !autograd::touched_rows(p).empty()) return;
  launch(b, true);
}

// Note [gradient blocks]: the large parameter (slot 0) takes what its buffer's later parameters
// left waiting (a bias: final before its weight) into the same rounds, so each round travels once.
void GradReducer::take_block_gradient(size_t b, size_t slot, const Tensor& g) {
  ZT_CHECK(reducing_, "[zero] a gradient in blocks outside a reducing pass");
  bufs_[b].waiting.push_back({slot, g});
  if (slot == 0) send_blocks(b);
}

// What the rounds' reduction waits for finishes first, as the predictor plays it (its buffer is
// larger than any bucket in flight may be).
void GradReducer::send_blocks(size_t b) {
  Buf& buf = bufs_[b];
  for (size_t f : flights_.admit(b)) finish(f);
  reduce_in_blocks(group_, buf.waiting, plan_.buffers[b], plan_.policy.comm_dtype, block_shard(b), buf.stale_rounds,
                   label_ + ", bucket " + std::to_string(b), comm_overlap_);
  buf.waiting.clear();
}

// With gradients sent to the host the device's shard of a buffer in blocks exists from the pass's
// first round until deliver() hands it down; every round of a new one is written, not added.
Tensor& GradReducer::block_shard(size_t b) {
  Buf& buf = bufs_[b];
  if (!buf.shard.defined()) {
    TagScope tag(MemTag::comm);
    buf.shard = Tensor::empty({buf.own.size()}, plan_.policy.grad_accum_dtype, plan_.policy.device);
    buf.stale_rounds.assign(buf.stale_rounds.size(), true);
  }
  return buf.shard;
}

void GradReducer::launch(size_t b, bool early) {
  Buf& buf = bufs_[b];
  if (plan_.buffers[b].block_elems > 0) {  // what still waits; rounds no gradient reached: zeros
    if (!buf.waiting.empty()) send_blocks(b);
    const int64_t E = plan_.buffers[b].block_elems, S = block_shard(b).numel();
    for (size_t j = 0; j < buf.stale_rounds.size(); ++j)
      if (buf.stale_rounds[j]) buf.shard.slice(0, int64_t(j) * E, std::min(S, int64_t(j + 1) * E)).zero_();
    buf.stale_rounds.assign(buf.stale_rounds.size(), false);
    buf.launched = true;
    if (on_launched_) on_launched_(b);
    deliver(b);
    return;
  }
  open_bucket(b);  // a bucket no gradient reached still takes part, as zeros
  zero_stale_slots(b);
  for (size_t f : flights_.admit(b)) finish(f);  // stages 0-1: the full gradient is a state
  buf.launched = true;
  flights_.launched(b);
  try {
    comm::CollOptions o;
    o.op = comm::ReduceOp::avg;
    o.label = label_ + ", bucket " + std::to_string(b);
    TagScope tag(MemTag::comm);
    if (plan_.buffers[b].sparse) {
      buf.transfer = buf.rows->launch(buf.full, o);
    } else {
      Tensor in = flights_.made(b, "wire copy");  // Note [step schedule]: the flight's own buffer
      if (in.defined())
        ops::cast_into(in, buf.full);
      else
        in = buf.full;
      if (early) {  // the rows accumulate into the zeroed buffer while the copy travels
        ZT_CHECK(!in.same(buf.full), "[zero] tied rows need the wire copy");
        buf.full.zero_();
        buf.early = true;
        ++sparse_bytes_.tied_early;
      }
      buf.transfer = dense_->launch(in, o);
    }
  } catch (...) {  // nothing in flight for b: a later end_backward must not wait for it
    flights_.finished(b);
    throw;
  }
  if (on_launched_) on_launched_(b);
  if (!overlap_) finish(b);
}

void GradReducer::finish(size_t b) {
  Buf& buf = bufs_[b];
  if (!buf.transfer) return;
  const Tensor avg = buf.transfer->finish(comm_overlap_);
  buf.transfer = nullptr;
  flights_.finished(b);
  if (buf.early) {  // the rows come next (finish_tied_rows); full keeps accumulating them
    buf.early_sum = avg;
    return;
  }
  store_reduced(b, avg);
  deliver(b);
}

// Note [host gradient shard]: with gradients sent to the host, on_final copies the shard down and
// the device's copy goes (its sum of squares kept for the step's norm first); later device work
// waits for that copy (OptimShard::take_gradient), so the memory is reused only once it is read.
void GradReducer::deliver(size_t b) {
  Buf& buf = bufs_[b];
  if (plan_.policy.grads_to_host) {
    if (!sums_.defined())
      sums_ = Tensor::empty({int64_t(bufs_.size())}, DType::i64, MemTag::workspace, plan_.policy.device);
    ops::sum_of_squares_to(buf.shard, sums_, int64_t(b));
  }
  if (boundary_ && on_final_) on_final_(b);
  if (plan_.policy.grads_to_host) buf.shard = Tensor();
}

// The averaged gradient (stage 0: the whole buffer; else this rank's range) where the optimizer
// reads it; returns that place (the tied embedding's rows are added there next).
Tensor GradReducer::store_reduced(size_t b, const Tensor& avg) {
  Buf& buf = bufs_[b];
  const Policy& pol = plan_.policy;
  if (pol.grads_to_host) {  // Note [host gradient shard]: the reduction's own output, until deliver()
    for (auto& s : plan_.buffers[b].params) autograd::set_grad(params_[s.index], Tensor());
    buf.full = Tensor();
    buf.shard = avg.dtype() == pol.grad_accum_dtype ? avg : ops::cast(avg, pol.grad_accum_dtype);
    return buf.shard;
  }
  if (pol.shard_gradients()) {
    if (buf.shard_stale)
      ops::cast_into(buf.shard, avg);  // 0 + avg rounded once, the last step's values never read
    else
      ops::axpy_(buf.shard, 1.f, avg);
    buf.shard_stale = false;
    for (auto& s : plan_.buffers[b].params) autograd::set_grad(params_[s.index], Tensor());
    buf.full = Tensor();
    return buf.shard;
  }
  Tensor dst = pol.shard_optimizer() ? buf.full.slice(0, buf.own.begin, buf.own.end) : buf.full;
  if (!avg.same(dst)) ops::cast_into(dst, avg);
  return dst;
}

void GradReducer::end_backward() {
  if (reducing_)
    for (size_t b = 0; b < bufs_.size(); ++b)
      if (!bufs_[b].launched) launch(b);
  while (!flights_.idle()) finish(flights_.in_flight().front());
  for (size_t b = 0; b < bufs_.size(); ++b)  // the same order on every rank
    if (bufs_[b].early) finish_tied_rows(b);
}

// Note [tied rows]: the embedding's rows, averaged as sparse rows, plus the dense part's average.
void GradReducer::finish_tied_rows(size_t b) {
  Buf& buf = bufs_[b];
  buf.early = false;
  comm::CollOptions o;
  o.op = comm::ReduceOp::avg;
  o.label = label_ + ", bucket " + std::to_string(b) + " embedding rows";
  std::unique_ptr<Transfer> rows;
  {
    TagScope tag(MemTag::comm);
    rows = buf.rows->launch(buf.full, o);
  }
  rows->add_to(store_reduced(b, buf.early_sum), comm_overlap_);  // the rows' positions only
  buf.early_sum = Tensor();
  deliver(b);
}

Tensor GradReducer::sums_of_squares() {
  if (plan_.policy.grads_to_host) {
    ZT_CHECK(sums_.defined(), "[zero] no gradient was final this step");
    return std::exchange(sums_, Tensor());
  }
  Tensor sums = Tensor::empty({int64_t(bufs_.size())}, DType::i64, MemTag::workspace, plan_.policy.device);
  for (size_t b = 0; b < bufs_.size(); ++b) ops::sum_of_squares_to(owned(b), sums, int64_t(b));
  return sums;
}

Tensor GradReducer::owned(size_t b) const {
  const Buf& buf = bufs_[b];
  if (plan_.policy.shard_gradients()) return buf.shard;
  const Range r = plan_.optim_range(b, group_.rank());
  return buf.full.slice(0, r.begin, r.end);
}

void GradReducer::zero() {
  for (size_t b = 0; b < bufs_.size(); ++b) {
    Buf& buf = bufs_[b];
    // Note [stale gradient slots]: the values stay; the next gradients write over them.
    buf.shard_stale = buf.shard.defined();
    buf.stale_rounds.assign(buf.stale_rounds.size(), true);
    if (!buf.full.defined()) continue;
    for (auto& s : plan_.buffers[b].params) autograd::mark_grad_zeroed(params_[s.index]);
  }
}

}  // namespace zt::zero
