#pragma once
// Internal to zt_comm: backend factories (one of mpi.cpp / no_mpi.cpp is compiled), the
// argument checks Group runs before any backend sees a call, and element-wise helpers.
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "zt/comm/group.h"

namespace zt::comm::detail {

GroupPtr make_local_group(Device device = Device::cpu());
GroupPtr make_mpi_group();  // throws ErrorKind::comm in a build without MPI
// slot_bytes: each rank's staging buffer (two per rank); 0 = the default (ZT_SHM_SLOT_KIB or
// 1 MiB). Throws ErrorKind::comm in a build without MPI or when ranks span several nodes.
GroupPtr make_shm_group(size_t slot_bytes = 0);
// Whether g is a shm group whose large all_gathers and broadcasts read peers in place (Note
// [shm single copy]); false for every other group.
bool shm_single_copy(const Group& g);
GroupPtr make_launched_group();  // "auto" under mpirun: shm on one node, else mpi
// make_group("nccl"): bootstrapped over MPI under mpirun (a GroupStore), else one rank on
// cuda:0; nccl.cpp or no_nccl.cpp defines it.
GroupPtr make_launched_nccl_group();

// All throw ErrorKind::invalid_argument. Buffers: defined, with storage, contiguous, on the
// group's device; avg only on floating dtypes; pairs share a dtype and have size-consistent
// element counts.
void check_buffer(Coll c, const Tensor& t, const char* what, Device device = Device::cpu());
void check_op(Coll c, ReduceOp op, DType d);
void check_reduce_scatter(int size, const Tensor& in, const Tensor& out, Device device = Device::cpu());
void check_all_gather(int size, const Tensor& in, const Tensor& out, Device device = Device::cpu());
void check_all_to_all(int size, const Tensor& in, const Tensor& out, Device device = Device::cpu());
void check_root(int size, int root);
void check_peer(Coll c, int size, int rank, int peer);  // send / recv: another rank of the group
// True when the byte ranges of a and b intersect (both contiguous).
bool overlaps(const Tensor& a, const Tensor& b);

// A Work that is complete when made (local and fake backends).
WorkPtr done_work(uint64_t seq);
void copy_bytes(const Tensor& in, Tensor& out);  // same nbytes; aliasing allowed
// t = t / size (avg) or t * size (fake sum), in fp32 for floating dtypes with one rounding
// for 16-bit; integers multiply with two's-complement wrap-around, as MPI_SUM does.
void divide_(Tensor& t, int size);
void multiply_(Tensor& t, int size);

// "[comm] all_gather timed out after 5.0 s on rank 1 of 2 (#17, step 3): <why>", why by default
// "a peer stalled or died"; a backend that knows who is missing says so (not_arrived).
std::string timeout_message(Coll c, uint64_t seq, double seconds, int rank, int size, const std::string& label,
                            const std::string& why = "");
// "rank 3 did not arrive (stalled or died)", "ranks 1, 2 did not arrive (...)"; "" for none.
std::string not_arrived(const std::vector<int>& ranks);
// "all_gather #17 (step 3)": how other errors name the collective they come from.
std::string call_name(Coll c, uint64_t seq, const std::string& label);
// This process's rank in the job (the launcher's OMPI_COMM_WORLD_RANK or PMIX_RANK; 0 without
// one), which messages name rather than a sub-group's rank.
int world_rank();

// A collective followed by host work once it completes (run once, by wait() or a true test()).
class ThenWork : public Work {
 public:
  ThenWork(WorkPtr inner, std::function<void()> then)
      : Work(inner->seq()), inner_(std::move(inner)), then_(std::move(then)) {}
  void wait() override {
    inner_->wait();
    run();
  }
  bool test() override {
    if (!inner_->test()) return false;
    run();
    return true;
  }
  double busy_seconds() const override { return inner_->busy_seconds(); }
  double blocked_seconds() const override { return inner_->blocked_seconds(); }

 private:
  void run() {
    if (then_) std::exchange(then_, nullptr)();
  }
  WorkPtr inner_;
  std::function<void()> then_;
};

}  // namespace zt::comm::detail
