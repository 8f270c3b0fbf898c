// Note [staged group]: collectives of device tensors over a host backend (shm, mpi, and several
// ranks sharing one GPU, which NCCL refuses): each call copies its input down into pinned host memory,
// runs the host group's collective and copies the result up once it completes (wait, or a test
// that finds it done). Sequence numbers, labels, the signature check and timeouts are the host
// group's; this group counts the same bytes. The sim device's collectives go this way.
#include "comm_detail.h"
#include "zt/comm/group.h"

namespace zt::comm {
namespace {

class StagedGroup final : public Group {
 public:
  StagedGroup(GroupPtr host, Device device)
      : host_(std::move(host)), device_(device), name_(std::string(host_->backend()) + " staged") {
    set_timeout(host_->timeout());
    Group::set_check_collectives(host_->check_collectives());
  }

  int rank() const override { return host_->rank(); }
  int size() const override { return host_->size(); }
  const char* backend() const override { return name_.c_str(); }
  Device device() const override { return device_; }
  std::shared_ptr<Group> split(int color, int key) override {
    return std::make_shared<StagedGroup>(host_->split(color, key), device_);
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
    Tensor h = down(buf);
    return up(host_->all_reduce_async(h, options(c)), h, buf);
  }
  WorkPtr do_reduce_scatter(const Tensor& in, Tensor& out, const Call& c) override {
    Tensor h_in = down(in), h = host_like(out);
    return up(host_->reduce_scatter_async(h_in, h, options(c)), h, out, h_in);
  }
  WorkPtr do_all_gather(const Tensor& in, Tensor& out, const Call& c) override {
    Tensor h_in = down(in), h = host_like(out);
    return up(host_->all_gather_async(h_in, h, options(c)), h, out, h_in);
  }
  WorkPtr do_broadcast(Tensor& buf, int root, const Call& c) override {
    Tensor h = down(buf);
    return up(host_->broadcast_async(h, root, options(c)), h, buf);
  }
  WorkPtr do_barrier(const Call& c) override { return host_->barrier_async(options(c)); }
  WorkPtr do_all_to_all(const Tensor& in, Tensor& out, const Call& c) override {
    Tensor h_in = down(in), h = host_like(out);
    return up(host_->all_to_all_async(h_in, h, options(c)), h, out, h_in);
  }
  WorkPtr do_send(const Tensor& buf, int peer, const Call& c) override {
    Tensor h = down(buf);  // alive until the send completes
    return std::make_shared<detail::ThenWork>(host_->send_async(h, peer, options(c)), [h] {});
  }
  WorkPtr do_recv(Tensor& buf, int peer, const Call& c) override {
    Tensor h = host_like(buf);
    return up(host_->recv_async(h, peer, options(c)), h, buf);
  }

 private:
  static CollOptions options(const Call& c) { return CollOptions(c.op, c.label, c.timeout_s); }
  // Pinned, so a GPU's copies down and up are DMA (pinned_memory in the metrics).
  static Tensor host_like(const Tensor& t) { return Tensor::empty_pinned(t.shape(), t.dtype(), MemTag::comm); }
  static Tensor down(const Tensor& t) {
    Tensor h = host_like(t);
    h.copy_(t);  // waits for the device's stream: the values are the ones queued before the call
    return h;
  }
  // The host result goes up once the collective completes; the host copies (the result, and the
  // input a backend may read until then) live until then.
  static WorkPtr up(WorkPtr w, Tensor host, Tensor dst, Tensor host_in = Tensor()) {
    return std::make_shared<detail::ThenWork>(std::move(w), [host, dst, host_in]() mutable { dst.copy_(host); });
  }

  GroupPtr host_;
  Device device_;
  std::string name_;
};

bool is_local(const Group& g) { return g.size() == 1 && std::string(g.backend()) == "local"; }

}  // namespace

bool stages_through_host(const Group& host, Device device) { return host.device() != device && !is_local(host); }

GroupPtr stage_on(GroupPtr host, Device device) {
  if (host->device() == device) return host;
  ZT_CHECK_AS(ErrorKind::comm, host->device().is_cpu(), "[comm] backend ", host->backend(), " keeps its tensors on ",
              host->device(), ", not on ", device);
  if (is_local(*host)) {  // one process: a gather or scatter is a copy on the device (no trip down and up)
    GroupPtr g = detail::make_local_group(device);
    g->set_timeout(host->timeout());
    g->set_check_collectives(host->check_collectives());
    return g;
  }
  return std::make_shared<StagedGroup>(std::move(host), device);
}

}  // namespace zt::comm
