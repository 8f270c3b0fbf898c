#pragma once
// Process groups and collectives (c10d-style). Every collective has an async form returning a
// Work; wait() blocks up to the group's timeout and rethrows failures with the collective's
// name and the caller's context ("step 12, bucket 3"), so nothing hangs silently.
//
// Byte accounting (Note [comm bytes]): per call, on this rank, we count the payload that an
// optimal algorithm moves in and out in units of the buffer: reduce_scatter counts its input
// bytes, all_gather its output bytes, all_reduce twice its buffer (reduce-scatter + all-gather),
// broadcast its buffer. Hence a ZeRO step moves 2Ψ (stages 0-2) or 3Ψ (stage 3) elements.
#include <array>
#include <cstdint>
#include <memory>
#include <string>

#include "zt/core/tensor.h"

namespace zt::comm {

enum class ReduceOp { sum, max };
enum class Coll { all_reduce, reduce_scatter, all_gather, broadcast, barrier };
constexpr size_t kNumColl = 5;
const char* coll_name(Coll c);

struct CommStats {
  std::array<uint64_t, kNumColl> bytes{};
  std::array<uint64_t, kNumColl> calls{};
  uint64_t total_bytes() const;
};

class Work {
 public:
  virtual ~Work() = default;
  virtual void wait() = 0;   // throws zt::Error on failure or timeout
  virtual bool test() = 0;   // true when complete (never throws for timeout)
};
using WorkPtr = std::shared_ptr<Work>;

class Group {
 public:
  virtual ~Group() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual const char* backend() const = 0;
  // Ranks with the same color form a group, ordered by key (then by old rank).
  virtual std::shared_ptr<Group> split(int color, int key) = 0;

  // Tensors must be contiguous, f32/i32/i64, and stay alive until wait() returns.
  virtual WorkPtr all_reduce_async(Tensor& buf, ReduceOp op = ReduceOp::sum) = 0;  // in place
  // in.numel() == size() * out.numel(); out = sum over ranks of in's slice [rank*n, (rank+1)*n).
  virtual WorkPtr reduce_scatter_async(const Tensor& in, Tensor& out) = 0;
  // out.numel() == size() * in.numel(); out's slice r = rank r's in.
  virtual WorkPtr all_gather_async(const Tensor& in, Tensor& out) = 0;
  virtual WorkPtr broadcast_async(Tensor& buf, int root) = 0;
  virtual WorkPtr barrier_async() = 0;

  void all_reduce(Tensor& buf, ReduceOp op = ReduceOp::sum) { all_reduce_async(buf, op)->wait(); }
  void reduce_scatter(const Tensor& in, Tensor& out) { reduce_scatter_async(in, out)->wait(); }
  void all_gather(const Tensor& in, Tensor& out) { all_gather_async(in, out)->wait(); }
  void broadcast(Tensor& buf, int root) { broadcast_async(buf, root)->wait(); }
  void barrier() { barrier_async()->wait(); }
  double all_reduce_scalar(double v, ReduceOp op = ReduceOp::sum);  // convenience, f32 on the wire

  // Ends every process of the job (MPI_Abort); for the CLI after a fatal error. Local: no-op.
  virtual void abort_job(int code) = 0;

  void set_timeout(double seconds) { timeout_s_ = seconds; }
  double timeout() const { return timeout_s_; }
  void set_context(std::string ctx) { context_ = std::move(ctx); }  // named in timeout errors
  const std::string& context() const { return context_; }
  const CommStats& stats() const { return stats_; }
  void reset_stats() { stats_ = CommStats{}; }

 protected:
  void count(Coll c, uint64_t bytes) {
    stats_.bytes[size_t(c)] += bytes;
    stats_.calls[size_t(c)] += 1;
  }
  double timeout_s_ = 300.0;
  std::string context_;
  CommStats stats_;
};
using GroupPtr = std::shared_ptr<Group>;

// "local" (one process), "mpi", or "auto" (mpi when launched by mpirun, else local).
// "mpi" in a build without MPI throws "[comm] backend 'mpi' is not available in this build".
GroupPtr make_group(const std::string& backend);
bool launched_by_mpirun();

}  // namespace zt::comm
