// The "local" backend: a group of one process. Collectives reduce to copies (or nothing); the
// checks, sequence numbers and byte counts are Group's, exactly as for the MPI backend. Its
// tensors may live on a device: the copies are then the device's (on its stream).
#include "comm_detail.h"

namespace zt::comm::detail {
namespace {

class LocalGroup : public Group {
 public:
  explicit LocalGroup(Device device) : device_(device) {}
  int rank() const override { return 0; }
  int size() const override { return 1; }
  const char* backend() const override { return "local"; }
  Device device() const override { return device_; }

  std::shared_ptr<Group> split(int color, int key) override {
    (void)color, (void)key;  // every color holds just this process
    auto g = std::make_shared<LocalGroup>(device_);
    g->set_timeout(timeout());
    return g;
  }

  void abort_job(int code) override { (void)code; }  // nothing else to end; the caller exits

 protected:
  // Sum, avg and max over one rank are the buffer itself (avg: x / 1 is exact in fp32).
  WorkPtr do_all_reduce(Tensor&, const Call& c) override { return done_work(c.seq); }
  WorkPtr do_reduce_scatter(const Tensor& in, Tensor& out, const Call& c) override {
    move(in, out);
    return done_work(c.seq);
  }
  WorkPtr do_all_gather(const Tensor& in, Tensor& out, const Call& c) override {
    move(in, out);
    return done_work(c.seq);
  }
  WorkPtr do_broadcast(Tensor&, int, const Call& c) override { return done_work(c.seq); }
  WorkPtr do_barrier(const Call& c) override { return done_work(c.seq); }

 private:
  static void move(const Tensor& in, Tensor& out) {
    if (out.device().is_cpu()) return copy_bytes(in, out);
    if (in.raw_data() != out.raw_data()) out.copy_(in.view(out.shape()));
  }

  Device device_;
};

}  // namespace

GroupPtr make_local_group(Device device) { return std::make_shared<LocalGroup>(device); }

}  // namespace zt::comm::detail
