// Note [staged group]: collectives of device tensors over a host backend (shm, mpi, and several
// ranks sharing one GPU, which NCCL refuses): each call copies its input down into pinned host memory,
// runs the host group's collective and copies the result up once it completes (wait, or a test
// that finds it done). Timeouts, the signature check and labels are the host group's; this group
// numbers its own calls and counts the same bytes. The sim device's collectives go this way.
//
// Note [staged chunks]: a call whose per-rank segment exceeds chunk_bytes runs as host collectives
// over chunks of the segment, all issued at the call in the same order on every rank (issuing at a
// wait or test would order them by timing): chunk k+1 goes down while the host runs chunk k, and
// chunk k goes up at the wait while later chunks still run. Every reduction is element-wise with
// a fixed rank order per element (shm), so a chunked result equals the whole call's.
#include <algorithm>
#include <functional>

#include "comm_detail.h"
#include "zt/comm/group.h"

namespace zt::comm {
namespace {

// A staged call: one host collective per chunk (one for barrier, send and recv) and the copy that
// brings its result up, run in chunk order.
class StagedWork final : public Work {
 public:
  struct Piece {
    WorkPtr work;
    std::function<void()> up;
  };
  StagedWork(uint64_t seq, std::vector<Piece> pieces) : Work(seq), pieces_(std::move(pieces)) {}
  void wait() override {
    for (; done_ < pieces_.size(); ++done_) {
      pieces_[done_].work->wait();
      bring_up(done_);
    }
  }
  bool test() override {
    for (; done_ < pieces_.size() && pieces_[done_].work->test(); ++done_) bring_up(done_);
    return done_ == pieces_.size();
  }
  double busy_seconds() const override { return sum(&Work::busy_seconds); }
  double blocked_seconds() const override { return sum(&Work::blocked_seconds); }

 private:
  std::vector<Piece> pieces_;
  size_t done_ = 0;
  void bring_up(size_t k) {  // cleared once done: a copy that throws is tried again at the next wait
    if (!pieces_[k].up) return;
    pieces_[k].up();
    pieces_[k].up = nullptr;
  }
  double sum(double (Work::*f)() const) const {
    double s = 0;
    for (const Piece& p : pieces_) s += ((*p.work).*f)();
    return s;
  }
};

class StagedGroup final : public Group {
 public:
  StagedGroup(GroupPtr host, Device device, int64_t chunk_bytes)
      : host_(std::move(host)),
        device_(device),
        chunk_bytes_(chunk_bytes),
        name_(std::string(host_->backend()) + " staged") {
    ZT_CHECK(chunk_bytes_ > 0, "[comm] a staged group needs chunks of at least one byte, got ", chunk_bytes_);
    set_timeout(host_->timeout());
    Group::set_check_collectives(host_->check_collectives());
  }

  int rank() const override { return host_->rank(); }
  int size() const override { return host_->size(); }
  const char* backend() const override { return name_.c_str(); }
  Device device() const override { return device_; }
  std::shared_ptr<Group> split(int color, int key) override {
    return std::make_shared<StagedGroup>(host_->split(color, key), device_, chunk_bytes_);
  }
  int local_size() const override { return host_->local_size(); }
  uint64_t cross_node_bytes() const override { return host_->cross_node_bytes(); }
  void abort_job(int code) override { host_->abort_job(code); }
  void set_check_collectives(bool on) override {
    Group::set_check_collectives(on);
    host_->set_check_collectives(on);
  }

 protected:
  WorkPtr do_all_reduce(Tensor& buf, const Call& c) override {
    return chunked(buf, 1, buf, 1, c,
                   [this](Tensor& in, Tensor&, const CollOptions& o) { return host_->all_reduce_async(in, o); });
  }
  WorkPtr do_reduce_scatter(const Tensor& in, Tensor& out, const Call& c) override {
    return chunked(in, size(), out, 1, c, [this](Tensor& i, Tensor& o, const CollOptions& opt) {
      return host_->reduce_scatter_async(i, o, opt);
    });
  }
  WorkPtr do_all_gather(const Tensor& in, Tensor& out, const Call& c) override {
    return chunked(in, 1, out, size(), c,
                   [this](Tensor& i, Tensor& o, const CollOptions& opt) { return host_->all_gather_async(i, o, opt); });
  }
  WorkPtr do_broadcast(Tensor& buf, int root, const Call& c) override {
    return chunked(buf, 1, buf, 1, c, [this, root](Tensor& in, Tensor&, const CollOptions& o) {
      return host_->broadcast_async(in, root, o);
    });
  }
  WorkPtr do_barrier(const Call& c) override { return one(c, host_->barrier_async(options(c, c.label)), nullptr); }
  WorkPtr do_all_to_all(const Tensor& in, Tensor& out, const Call& c) override {
    return chunked(in, size(), out, size(), c,
                   [this](Tensor& i, Tensor& o, const CollOptions& opt) { return host_->all_to_all_async(i, o, opt); });
  }
  WorkPtr do_send(const Tensor& buf, int peer, const Call& c) override {
    Tensor h = host_like(buf.shape(), buf.dtype());
    h.copy_(buf);  // alive until the send completes
    return one(c, host_->send_async(h, peer, options(c, c.label)), [h] {});
  }
  WorkPtr do_recv(Tensor& buf, int peer, const Call& c) override {
    Tensor h = host_like(buf.shape(), buf.dtype());
    return one(c, host_->recv_async(h, peer, options(c, c.label)), [h, buf]() mutable { buf.copy_(h); });
  }

 private:
  using Launch = std::function<WorkPtr(Tensor& in, Tensor& out, const CollOptions&)>;
  static CollOptions options(const Call& c, const std::string& label) { return CollOptions(c.op, label, c.timeout_s); }
  // A call of one host collective, numbered as this group's call.
  static WorkPtr one(const Call& c, WorkPtr w, std::function<void()> then) {
    return std::make_shared<StagedWork>(c.seq, std::vector<StagedWork::Piece>{{std::move(w), std::move(then)}});
  }
  // Pinned, so a GPU's copies down and up are DMA (pinned_memory in the metrics).
  static Tensor host_like(const Shape& shape, DType dt) { return Tensor::empty_pinned(shape, dt, MemTag::comm); }

  // `in` is in_segs segments of S elements, `out` out_segs of S (the same tensor in place): chunk
  // [a, a + m) of S takes those ranges of every segment down, contiguous (elements [in_segs * a,
  // in_segs * (a + m)) of the host input), and brings the result's up (Note [staged chunks]). The
  // host buffers are made before anything is sent: a rank that cannot make them sends nothing. A
  // copy down waits for the device's stream: the values are the ones queued before the call.
  WorkPtr chunked(const Tensor& in, int in_segs, const Tensor& out, int out_segs, const Call& c, const Launch& launch) {
    const bool in_place = in.same(out);
    const Tensor src = in.view({in.numel()}), dst = out.view({out.numel()});
    const int64_t S = dst.numel() / out_segs;
    const int64_t per = std::max<int64_t>(1, chunk_bytes_ / int64_t(dtype_size(in.dtype())));
    const int64_t chunks = std::max<int64_t>(1, (S + per - 1) / per);
    const Tensor host_in = host_like({in.numel()}, in.dtype());
    const Tensor host_out = in_place ? host_in : host_like({out.numel()}, out.dtype());
    std::vector<StagedWork::Piece> pieces;
    for (int64_t k = 0; k < chunks; ++k) {
      const int64_t a = k * per, m = std::min(S, a + per) - a;
      Tensor h_in = host_in.slice(0, in_segs * a, in_segs * (a + m));
      for (int s = 0; s < in_segs; ++s) h_in.slice(0, s * m, (s + 1) * m).copy_(src.slice(0, s * S + a, s * S + a + m));
      Tensor h_out = host_out.slice(0, out_segs * a, out_segs * (a + m));
      const std::string label =
          chunks == 1 ? c.label
                      : c.label + (c.label.empty() ? "" : ", ") + "chunk " + std::to_string(k + 1) + "/" +
                            std::to_string(chunks) + " of call #" + std::to_string(c.seq);
      WorkPtr w = launch(h_in, h_out, options(c, label));
      // The host copies (the result, and the input a backend may read until then) live until then.
      auto up = [dst, h_in, h_out, out_segs, S, a, m]() mutable {
        for (int s = 0; s < out_segs; ++s)
          dst.slice(0, s * S + a, s * S + a + m).copy_(h_out.slice(0, s * m, (s + 1) * m));
      };
      pieces.push_back({std::move(w), std::move(up)});
    }
    return std::make_shared<StagedWork>(c.seq, std::move(pieces));
  }

  GroupPtr host_;
  Device device_;
  int64_t chunk_bytes_;
  std::string name_;
};

bool is_local(const Group& g) { return g.size() == 1 && std::string(g.backend()) == "local"; }

}  // namespace

bool stages_through_host(const Group& host, Device device) { return host.device() != device && !is_local(host); }

GroupPtr stage_on(GroupPtr host, Device device, int64_t chunk_bytes) {
  if (host->device() == device) return host;
  ZT_CHECK_AS(ErrorKind::comm, host->device().is_cpu(), "[comm] backend ", host->backend(), " keeps its tensors on ",
              host->device(), ", not on ", device);
  if (is_local(*host)) {  // one process: a gather or scatter is a copy on the device (no trip down and up)
    GroupPtr g = detail::make_local_group(device);
    g->set_timeout(host->timeout());
    g->set_check_collectives(host->check_collectives());
    return g;
  }
  return std::make_shared<StagedGroup>(std::move(host), device, chunk_bytes);
}

}  // namespace zt::comm
