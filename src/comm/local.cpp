// The "local" backend: a group of one process. Collectives reduce to copies (or nothing) but
// validate and count bytes exactly like the MPI backend, so engine logic is testable alone.
#include <cstring>

#include "comm_detail.h"

namespace zt::comm::detail {
namespace {

class DoneWork : public Work {
 public:
  void wait() override {}
  bool test() override { return true; }
};

class LocalGroup : public Group {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  const char* backend() const override { return "local"; }

  std::shared_ptr<Group> split(int color, int key) override {
    (void)color, (void)key;  // every color holds just this process
    auto g = std::make_shared<LocalGroup>();
    g->set_timeout(timeout());
    return g;
  }

  WorkPtr all_reduce_async(Tensor& buf, ReduceOp op) override {
    (void)op;  // the sum or max over one rank is the buffer itself
    check_buffer(Coll::all_reduce, buf, "buffer");
    count(Coll::all_reduce, 2 * buf.nbytes());
    return done();
  }

  WorkPtr reduce_scatter_async(const Tensor& in, Tensor& out) override {
    check_reduce_scatter(1, in, out);
    count(Coll::reduce_scatter, in.nbytes());
    copy(in, out);
    return done();
  }

  WorkPtr all_gather_async(const Tensor& in, Tensor& out) override {
    check_all_gather(1, in, out);
    count(Coll::all_gather, out.nbytes());
    copy(in, out);
    return done();
  }

  WorkPtr broadcast_async(Tensor& buf, int root) override {
    check_buffer(Coll::broadcast, buf, "buffer");
    check_root(1, root);
    count(Coll::broadcast, buf.nbytes());
    return done();
  }

  WorkPtr barrier_async() override {
    count(Coll::barrier, 0);
    return done();
  }

  void abort_job(int code) override { (void)code; }  // nothing else to end; the caller exits

 private:
  static WorkPtr done() { return std::make_shared<DoneWork>(); }
  static void copy(const Tensor& in, Tensor& out) {
    if (in.nbytes() > 0 && in.raw_data() != out.raw_data())
      std::memmove(out.raw_data(), in.raw_data(), in.nbytes());
  }
};

}  // namespace

GroupPtr make_local_group() { return std::make_shared<LocalGroup>(); }

}  // namespace zt::comm::detail
