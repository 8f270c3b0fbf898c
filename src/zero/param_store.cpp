#include "param_store.h"

#include "zt/ops/ops.h"

namespace zt::zero {

ParamStore::ParamStore(const Plan& plan, std::vector<Tensor> params, comm::Group& group, PrefetchLimits limits)
    : plan_(plan), params_(std::move(params)), group_(group), limits_(limits) {
  const Policy& pol = plan_.policy;
  for (size_t b = 0; b < plan_.buffers.size(); ++b) {
    const BufferPlan& bp = plan_.buffers[b];
    Buf buf;
    buf.own = shard_range(bp.padded, plan_.world, group_.rank());
    Tensor full;
    {
      TagScope tag(pol.shard_parameters() && !plan_.persistent[b] ? MemTag::comm : MemTag::param);
      full = Tensor::zeros({bp.padded}, pol.param_dtype);
    }
    for (auto& s : bp.params) {
      Tensor dst = full.slice(0, s.offset, s.offset + s.numel);
      ops::cast_into(dst, params_[s.index].reshape({s.numel}));
    }
    if (pol.shard_parameters()) {
      TagScope tag(MemTag::param);
      buf.shard = full.slice(0, buf.own.begin, buf.own.end).clone();
    }
    if (!pol.shard_parameters() || plan_.persistent[b]) buf.full = full;
    bufs_.push_back(std::move(buf));
    if (bufs_.back().full.defined()) bind(b);
    else unbind(b);
  }
}

void ParamStore::bind(size_t b) {
  const Tensor& full = bufs_[b].full;
  for (auto& s : plan_.buffers[b].params) params_[s.index].rebind(full.storage(), full.offset() + s.offset, full.dtype());
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
    buf.gather_work = nullptr;
    bind(b);
  }
}

void ParamStore::release(size_t b) {
  Buf& buf = bufs_[b];
  if (!plan_.policy.shard_parameters() || plan_.persistent[b] || !buf.full.defined()) return;
  if (buf.gather_work) {
    buf.gather_work->wait();
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
