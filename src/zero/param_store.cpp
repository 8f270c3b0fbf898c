#include "param_store.h"

#include "zt/ops/ops.h"

namespace zt::zero {

ParamStore::ParamStore(const Plan& plan, std::vector<Tensor> params, comm::Group& group, PrefetchLimits limits,
                       const Materialize& materialize)
    : plan_(plan), params_(std::move(params)), group_(group), limits_(limits) {
  const Policy& pol = plan_.policy;
  const size_t nb = plan_.buffers.size();
  bufs_.resize(nb);
  for (size_t b = 0; b < nb; ++b) bufs_[b].own = shard_range(plan_.buffers[b].padded, plan_.world, group_.rank());
  if (!pol.shard_parameters()) {
    for (size_t b = 0; b < nb; ++b) {
      TagScope tag(MemTag::param);
      bufs_[b].full = Tensor::zeros({plan_.buffers[b].padded}, pol.param_dtype);
    }
    // Model order, whatever the bucket order: deferred initialisers share one generator.
    std::vector<std::pair<size_t, const ParamSlot*>> where(params_.size());
    for (size_t b = 0; b < nb; ++b)
      for (auto& s : plan_.buffers[b].params) where[s.index] = {b, &s};
    for (size_t i = 0; i < params_.size(); ++i) {
      const auto [b, s] = where[i];
      write_initial(i, bufs_[b].full.slice(0, s->offset, s->offset + s->numel), materialize);
    }
    for (size_t b = 0; b < nb; ++b) bind(b);
    return;
  }
  for (size_t b = 0; b < nb; ++b) {  // stage 3: one unit at a time (units are in model order)
    Buf& buf = bufs_[b];
    Tensor full;
    {
      TagScope tag(plan_.persistent[b] ? MemTag::param : MemTag::comm);
      full = Tensor::zeros({plan_.buffers[b].padded}, pol.param_dtype);
    }
    for (auto& s : plan_.buffers[b].params)
      write_initial(s.index, full.slice(0, s.offset, s.offset + s.numel), materialize);
    {
      TagScope tag(MemTag::param);
      buf.shard = full.slice(0, buf.own.begin, buf.own.end).clone();
    }
    if (plan_.persistent[b]) {
      buf.full = full;
      bind(b);
    } else {
      unbind(b);
    }
  }
}

void ParamStore::write_initial(size_t index, Tensor dst, const Materialize& materialize) const {
  const Tensor& p = params_[index];
  if (p.has_storage()) {
    ops::cast_into(dst, p);
    return;
  }
  ZT_CHECK(materialize, "[zero] parameter ", index, " has no values and no initialiser");
  TagScope tag(MemTag::workspace);
  Tensor values = Tensor::empty(p.shape(), DType::f32);
  materialize(p, values);
  ops::cast_into(dst, values);
}

void ParamStore::bind(size_t b) {
  const Tensor& full = bufs_[b].full;
  for (auto& s : plan_.buffers[b].params)
    params_[s.index].rebind(full.storage(), full.offset() + s.offset, full.dtype());
}

void ParamStore::unbind(size_t b) {
  for (auto& s : plan_.buffers[b].params) params_[s.index].release_storage();
}

Tensor ParamStore::owned(size_t b) const {
  const Buf& buf = bufs_[b];
  if (plan_.policy.shard_parameters()) return buf.shard;
  const Range r = plan_.optim_range(b, group_.rank());
  return buf.full.slice(0, r.begin, r.end);
}

void ParamStore::publish(size_t b, const std::string& label) {
  Buf& buf = bufs_[b];
  const Policy& pol = plan_.policy;
  if (!pol.shard_optimizer() || (pol.shard_parameters() && !buf.full.defined())) return;
  comm::CollOptions o;
  o.label = label;
  if (pol.shard_parameters()) {
    group_.all_gather(buf.shard, buf.full, o);
    return;
  }
  TagScope tag(MemTag::comm);  // the collective's input must not alias its output
  Tensor mine = buf.full.slice(0, buf.own.begin, buf.own.end).clone();
  group_.all_gather(mine, buf.full, o);
}

void ParamStore::gather(size_t b, bool wait, const std::string& label) {
  Buf& buf = bufs_[b];
  if (!buf.full.defined()) {
    {
      TagScope tag(MemTag::param);
      buf.full = Tensor::empty({plan_.buffers[b].padded}, plan_.policy.param_dtype);
    }
    comm::CollOptions o;
    o.label = label;
    buf.gather_work = group_.all_gather_async(buf.shard, buf.full, o);
  }
  if (wait && buf.gather_work) {
    buf.gather_work->wait();
    overlap_.add(*buf.gather_work);
    buf.gather_work = nullptr;
    bind(b);
  }
}

void ParamStore::release(size_t b) {
  Buf& buf = bufs_[b];
  if (!plan_.policy.shard_parameters() || plan_.persistent[b] || !buf.full.defined()) return;
  if (buf.gather_work) {
    buf.gather_work->wait();
    overlap_.add(*buf.gather_work);
    buf.gather_work = nullptr;
  }
  unbind(b);
  buf.full = Tensor();
}

void ParamStore::prefetch(size_t b, int dir, const std::string& label) {
  int64_t live = 0;
  for (size_t i = 0; i < bufs_.size(); ++i)
    if (bufs_[i].full.defined() && !plan_.persistent[i]) live += plan_.buffers[i].padded;
  int64_t budget = limits_.prefetch_elems;
  for (int64_t j = int64_t(b) + dir; j >= 0 && j < int64_t(bufs_.size()); j += dir) {
    const size_t u = size_t(j);
    if (plan_.persistent[u] || bufs_[u].full.defined()) continue;
    const int64_t n = plan_.buffers[u].padded;
    if (n > budget || live + n > limits_.max_live_elems) break;
    gather(u, false, label);
    budget -= n;
    live += n;
  }
}

}  // namespace zt::zero
