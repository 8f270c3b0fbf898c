// The "fake" backend (Note [fake group] in group.h): `size` ranks that all contribute what
// this rank contributes, so N-rank arithmetic runs in one process without peers.
#include "comm_detail.h"

namespace zt::comm {
namespace {

class FakeGroup : public Group {
 public:
  FakeGroup(int rank, int size) : rank_(rank), size_(size) {}

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* backend() const override { return "fake"; }

  std::shared_ptr<Group> split(int color, int key) override {
    (void)color, (void)key;  // every peer picks the same color and key: all stay, in order
    auto g = std::make_shared<FakeGroup>(rank_, size_);
    g->set_timeout(timeout());
    return g;
  }

  void abort_job(int code) override { (void)code; }

 protected:
  WorkPtr do_all_reduce(Tensor& buf, const Call& c) override {
    if (c.op == ReduceOp::sum) detail::multiply_(buf, size_);
    return detail::done_work(c.seq);
  }

  WorkPtr do_reduce_scatter(const Tensor& in, Tensor& out, const Call& c) override {
    const int64_t n = out.numel();
    detail::copy_bytes(in.view({in.numel()}).slice(0, rank_ * n, (rank_ + 1) * n), out);
    if (c.op == ReduceOp::sum) detail::multiply_(out, size_);
    return detail::done_work(c.seq);
  }

  WorkPtr do_all_gather(const Tensor& in, Tensor& out, const Call& c) override {
    const int64_t n = in.numel();
    const Tensor src = detail::overlaps(in, out) ? in.clone(MemTag::comm) : in;
    const Tensor flat = out.view({out.numel()});
    for (int r = 0; r < size_; ++r) {
      Tensor slot = flat.slice(0, r * n, (r + 1) * n);
      detail::copy_bytes(src, slot);
    }
    return detail::done_work(c.seq);
  }

  WorkPtr do_broadcast(Tensor&, int, const Call& c) override { return detail::done_work(c.seq); }
  WorkPtr do_barrier(const Call& c) override { return detail::done_work(c.seq); }

 private:
  int rank_, size_;
};

}  // namespace

GroupPtr make_fake_group(int rank, int size) {
  ZT_CHECK(size >= 1 && rank >= 0 && rank < size, "[comm] fake group: rank ", rank, " of size ", size,
           " is not a rank of a non-empty group");
  return std::make_shared<FakeGroup>(rank, size);
}

}  // namespace zt::comm
