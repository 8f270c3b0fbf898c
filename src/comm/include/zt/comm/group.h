#pragma once
// Process groups and collectives in PyTorch c10d's shape: every collective takes per-call
// options (reduction, timeout, a label) and its async form returns a Work with a sequence
// number; wait() blocks up to the timeout and rethrows failures naming the collective, its
// number and label ("step 12, bucket 3"), so nothing hangs silently.
//
// Byte accounting (Note [comm bytes]): per call, on this rank, we count the payload that an
// optimal algorithm moves in and out in units of the buffer: reduce_scatter counts its input
// bytes, all_gather its output bytes, all_reduce twice its buffer (reduce-scatter + all-gather),
// broadcast its buffer, all_to_all its input bytes. Hence a ZeRO step moves 2Ψ (stages 0-2) or
// 3Ψ (stage 3) elements.
// Point-to-point (Note [point-to-point]): send counts its buffer on the sender, recv its buffer on
// the receiver, so a parameter server's counters show W x Ψ/S in and out per step.
//
// Errors: a timeout, a failed peer or an MPI error throws ErrorKind::comm; misuse (shapes,
// dtypes, layout, root, an op the dtype cannot take) throws ErrorKind::invalid_argument on
// every rank alike, from checks shared by all backends that run before anything is sent and
// take no sequence number.
#include <array>
#include <cstdint>
#include <memory>
#include <string>

#include "zt/core/tensor.h"

namespace zt::comm {

// avg = sum / size, computed in fp32 for f32, bf16 and f16 (16-bit: one rounding after the
// division); integers take sum and max only.
enum class ReduceOp { sum, avg, max };
const char* reduce_op_name(ReduceOp op);

// send and recv are point-to-point (Note [point-to-point]), counted with the collectives.
enum class Coll { all_reduce, reduce_scatter, all_gather, broadcast, barrier, all_to_all, send, recv };
constexpr size_t kNumColl = 8;
const char* coll_name(Coll c);

// Implicit constructors keep call sites short: all_reduce(t, ReduceOp::max),
// all_gather(in, out, "step 3"), reduce_scatter(in, out, {ReduceOp::avg, "bucket 1", 30.0}).
// (Not an aggregate: GCC 12 warns on designated initializers that omit trailing members.)
struct CollOptions {
  ReduceOp op = ReduceOp::sum;  // read by all_reduce and reduce_scatter only
  double timeout_s = 0;         // 0 = the group's default (set_timeout)
  std::string label;            // named in errors, e.g. "step 3, micro-batch 2, bucket 1"

  CollOptions() = default;
  CollOptions(ReduceOp reduce_op) : op(reduce_op) {}
  CollOptions(std::string call_label) : label(std::move(call_label)) {}
  CollOptions(const char* call_label) : label(call_label) {}
  CollOptions(ReduceOp reduce_op, std::string call_label, double timeout = 0)
      : op(reduce_op), timeout_s(timeout), label(std::move(call_label)) {}
};

// Note [collective signatures]: what a rank says about each collective it launches, compared
// across ranks before any data moves, so ranks whose programs diverged (one collective behind, two
// equal-size units in a different order, an extra micro-batch) fail at once with one line naming
// both sides, instead of hanging until the timeout or silently pairing the wrong buffers. shm
// compares them in its segment at the collective's first sync point, mpi exchanges them with a
// small all_gather on a second communicator before posting the collective (its cost: BENCHMARKS.md),
// nccl the same on a second communicator and stream, waiting on the host for them (nccl.cpp).
// Fixed size and plain bytes: it travels as is. The label is compared by hash, shown truncated.
struct CallSignature {
  uint64_t seq = 0;
  uint32_t coll = 0, dtype = 0;
  int64_t numel = 0;  // per rank: the buffer (all_reduce, broadcast), the input otherwise
  int32_t root = -1;  // broadcast only
  uint32_t op = 0;    // all_reduce and reduce_scatter only
  uint64_t label_hash = 0;
  int32_t world_rank = 0;  // named in the message: the job's rank, not the sub-group's (not compared)
  uint32_t label_len = 0;
  char label[80] = {};

  bool same_call(const CallSignature& o) const;
};
static_assert(sizeof(CallSignature) == 128);

// "" when every rank's signature matches rank 0's; else one line naming the lowest rank that
// differs and rank 0, with both collectives, dtypes and sizes (the same line on every rank).
std::string signature_mismatch(const CallSignature* sigs, int n);

struct CommStats {
  std::array<uint64_t, kNumColl> bytes{};
  std::array<uint64_t, kNumColl> calls{};
  uint64_t total_bytes() const;
};

class Work {
 public:
  explicit Work(uint64_t seq) : seq_(seq) {}
  virtual ~Work() = default;
  virtual void wait() = 0;  // throws zt::Error on failure or timeout
  virtual bool test() = 0;  // true when complete (never throws for timeout)
  // Orders the device's compute stream after this collective (no host wait on GPU backends), so
  // ops queued next read its result (Note [device streams] in zt/core/device.h). Host backends:
  // wait().
  virtual void synchronize() { wait(); }
  // Per group, 1 for the first collective launched and +1 for each next, in launch order;
  // ranks launch in the same order, so the same number names the same collective everywhere.
  uint64_t seq() const { return seq_; }
  // For the overlap metric (steady clock, seconds; 0 when unknown). busy: from when the
  // transfer started running until it finished (shm; mpi cannot tell, see MpiWork). blocked:
  // time the caller spent inside wait() so far.
  virtual double busy_seconds() const { return 0; }
  virtual double blocked_seconds() const { return 0; }

 private:
  uint64_t seq_;
};
using WorkPtr = std::shared_ptr<Work>;

class Group {
 public:
  virtual ~Group() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual const char* backend() const = 0;
  // Where the tensors of its collectives must live: cpu, or the nccl group's GPU (checked).
  virtual Device device() const { return Device::cpu(); }
  // Ranks with the same color form a group, ordered by key (then by old rank). The new group
  // starts its own sequence numbers and statistics and inherits the default timeout.
  virtual std::shared_ptr<Group> split(int color, int key) = 0;

  // Tensors must be contiguous (f32, bf16, f16, i32 or i64) on device(), and stay alive until
  // wait() or synchronize().
  WorkPtr all_reduce_async(Tensor& buf, const CollOptions& opts = {});  // in place
  // in.numel() == size() * out.numel(); out = op over ranks of in's slice [rank*n, (rank+1)*n).
  WorkPtr reduce_scatter_async(const Tensor& in, Tensor& out, const CollOptions& opts = {});
  // out.numel() == size() * in.numel(); out's slice r = rank r's in.
  WorkPtr all_gather_async(const Tensor& in, Tensor& out, const CollOptions& opts = {});
  WorkPtr broadcast_async(Tensor& buf, int root, const CollOptions& opts = {});
  WorkPtr barrier_async(const CollOptions& opts = {});
  // in.numel() == out.numel() == size() * k: in's chunk r goes to rank r, out's chunk r comes
  // from rank r (ZeRO++'s quantized gradients, whose pieces cannot be summed on the wire).
  WorkPtr all_to_all_async(const Tensor& in, Tensor& out, const CollOptions& opts = {});

  void all_reduce(Tensor& buf, const CollOptions& opts = {}) { all_reduce_async(buf, opts)->wait(); }
  void reduce_scatter(const Tensor& in, Tensor& out, const CollOptions& opts = {}) {
    reduce_scatter_async(in, out, opts)->wait();
  }
  void all_gather(const Tensor& in, Tensor& out, const CollOptions& opts = {}) {
    all_gather_async(in, out, opts)->wait();
  }
  void broadcast(Tensor& buf, int root, const CollOptions& opts = {}) { broadcast_async(buf, root, opts)->wait(); }
  void barrier(const CollOptions& opts = {}) { barrier_async(opts)->wait(); }
  void all_to_all(const Tensor& in, Tensor& out, const CollOptions& opts = {}) {
    all_to_all_async(in, out, opts)->wait();
  }

  // Note [point-to-point]: `buf` goes to rank `peer` alone (send) or comes from it (recv); only
  // the two ranks take part. Messages between one pair arrive in the order they were sent, and
  // each recv must match its send's dtype and element count. They take their own numbers
  // (Work::seq counts this rank's sends and recvs), so the collectives' numbers stay aligned
  // across ranks. Backends without them (local, fake, shm, shm+mpi) throw ErrorKind::comm
  // "[comm] send is not available with backend shm", before anything is counted.
  WorkPtr send_async(const Tensor& buf, int peer, const CollOptions& opts = {});
  WorkPtr recv_async(Tensor& buf, int peer, const CollOptions& opts = {});
  void send(const Tensor& buf, int peer, const CollOptions& opts = {}) { send_async(buf, peer, opts)->wait(); }
  void recv(Tensor& buf, int peer, const CollOptions& opts = {}) { recv_async(buf, peer, opts)->wait(); }
  double all_reduce_scalar(double v, const CollOptions& opts = {});  // convenience, f32 on the wire
  // The sum of every rank's `v` in double, bit-identical on every rank: the values are all-gathered
  // (as i64 bits) and added in rank order (a gradient norm's squares, which f32 would round).
  double all_reduce_double(double v, const CollOptions& opts = {});

  // Ranks per node, when every node holds the same number of this group's ranks and each
  // node's ranks are consecutive (rank = node * local_size() + local rank); else 1. Hierarchical
  // schemes (ZeRO++) split along it. Fake and local groups: 1.
  virtual int local_size() const { return 1; }
  // Of stats(), the bytes of collectives between nodes (Note [comm bytes]): a hierarchical
  // group's MPI lane, an mpi group's all when its ranks span nodes; 0 for shm, local, fake.
  virtual uint64_t cross_node_bytes() const { return 0; }

  // Ends every process of the job (MPI_Abort); for the CLI after a fatal error. Local: no-op.
  virtual void abort_job(int code) = 0;

  void set_timeout(double seconds);  // the default for calls whose options leave it 0
  double timeout() const { return timeout_s_; }
  // Note [collective signatures]: on by default (run.check_collectives); split() passes it on.
  // Backends with nothing to compare (local, fake) ignore it.
  virtual void set_check_collectives(bool on) { check_ = on; }
  bool check_collectives() const { return check_; }
  uint64_t last_seq() const { return seq_; }  // 0 before the first collective
  const CommStats& stats() const { return stats_; }
  void reset_stats() { stats_ = CommStats{}; }

 protected:
  // What a backend needs to launch one collective that passed the shared checks.
  struct Call {
    Coll coll;
    ReduceOp op;
    uint64_t seq;
    double timeout_s;  // resolved: the call's or the group's
    std::string label;
    CallSignature sig;  // Note [collective signatures]
  };
  virtual WorkPtr do_all_reduce(Tensor& buf, const Call& c) = 0;
  virtual WorkPtr do_reduce_scatter(const Tensor& in, Tensor& out, const Call& c) = 0;
  virtual WorkPtr do_all_gather(const Tensor& in, Tensor& out, const Call& c) = 0;
  virtual WorkPtr do_broadcast(Tensor& buf, int root, const Call& c) = 0;
  virtual WorkPtr do_barrier(const Call& c) = 0;
  // By default an all_gather of every rank's whole input, keeping this rank's chunk of each:
  // right for any backend, size() times the traffic (mpi sends only the chunks).
  virtual WorkPtr do_all_to_all(const Tensor& in, Tensor& out, const Call& c);
  // Point-to-point: by default "not available with backend <backend()>" (ErrorKind::comm).
  virtual WorkPtr do_send(const Tensor& buf, int peer, const Call& c);
  virtual WorkPtr do_recv(Tensor& buf, int peer, const Call& c);

 private:
  // Takes the next sequence number; the signature describes the tensor t (numel elements each).
  Call next_call(Coll coll, const CollOptions& opts, DType dtype = DType::f32, int64_t numel = 0, int root = -1);
  Call next_p2p_call(Coll coll, const CollOptions& opts);  // takes the next send / recv number
  void count(Coll c, uint64_t bytes);

  double timeout_s_ = 300.0;
  bool check_ = true;
  uint64_t seq_ = 0;
  uint64_t p2p_seq_ = 0;  // sends and recvs: numbered apart from the collectives
  CommStats stats_;
};
using GroupPtr = std::shared_ptr<Group>;

// Fault injection (issue 31): this process sleeps `seconds` before launching every collective of
// kind `c`, in every group (0: none). A run's result must not depend on such timing.
void inject_delay_for_testing(Coll c, double seconds);

// Every rank passes its own error ("" if none); if any rank failed, every rank throws the same
// AgreedError of `kind`: the lowest failing rank's message, naming that rank when there are
// several, so it is said once and no rank is left waiting. `label` names the collectives.
void agree_on_error(Group& g, const std::string& error, const std::string& label, ErrorKind kind);

// "local" (one process), "mpi", "shm" (ranks of one node through a shared-memory segment set
// up over MPI, Note [shm backend] in shm.cpp; across nodes shm inside each node and MPI between
// them, backend() "shm+mpi", Note [hierarchical groups] in hier.cpp), "nccl" (GPUs, see
// make_nccl_group below), or "auto": under mpirun
// what shm gives, or mpi where shm cannot serve the layout; without mpirun local. "mpi" or "shm" in a build without MPI
// throws ErrorKind::comm "[comm] backend 'mpi' is not available in this build".
GroupPtr make_group(const std::string& backend);
bool launched_by_mpirun();

// Note [backend choice] (backend_choice.cpp): what run.comm_backend becomes for this process.
struct BackendSetting {
  std::string requested = "auto";  // run.comm_backend: one of backend_choices() (backends.h)
  bool under_mpirun = false;
  bool on_gpu = false;          // run.device is cuda
  int local_ranks = 1;          // ranks on this node
  int gpus = 0;                 // GPUs this process sees
  bool nccl_built = false;      // nccl_available()
  bool point_to_point = false;  // the parameter server's pushes and pulls: mpi carries them
};
struct BackendChoice {
  std::string backend;  // what make_group takes
  std::string note;     // why auto did not take nccl on a GPU ("" when there is nothing to say)
};
// Throws ErrorKind::config for a request this process cannot serve (nccl off the GPU, without
// CUDA, or with two ranks on one GPU), naming the nearest setting that works.
BackendChoice choose_backend(const BackendSetting& s);
bool mpi_available();   // whether this build has the mpi backend
bool shm_available();   // whether this build has the shm backend
bool nccl_available();  // whether this build has the nccl backend (built with CUDA)

// The "nccl" backend (nccl.cpp, Note [nccl backend]): one rank per GPU, tensors on the group's
// device, collectives on the group's own stream after the work queued on the compute stream.
// Ranks rendezvous through `store` (the unique id under "<prefix>.nccl_id", so a prefix per
// communicator) and must each hold another GPU: two ranks on one GPU throw ErrorKind::comm
// naming both. timeout_s bounds the rendezvous and the init, and is the group's timeout after.
// `device` becomes the calling thread's current GPU. make_group("nccl") does this
// over MPI under mpirun (device: local rank modulo the GPUs seen), else as one rank on cuda:0.
// Without CUDA throws ErrorKind::comm "[comm] backend 'nccl' is not available in this build
// (built without CUDA)".
class Store;
GroupPtr make_nccl_group(int rank, int size, int device, Store& store, const std::string& prefix,
                         double timeout_s = 300.0);

// Note [staged group] (staged.cpp): `host`'s collectives for tensors on `device`, copied down to
// the host and up again around each call, in chunks of at most chunk_bytes per rank segment
// (Note [staged chunks]); `host` itself when it already takes tensors there (nccl on its GPU, or
// device cpu); a local group of one process on `device` for a local `host` (its collectives are
// copies, which the device makes itself). Throws ErrorKind::comm when `host` keeps tensors on
// another device.
inline constexpr int64_t kStagedChunkBytes = int64_t(4) << 20;
GroupPtr stage_on(GroupPtr host, Device device, int64_t chunk_bytes = kStagedChunkBytes);
bool stages_through_host(const Group& host, Device device);  // whether stage_on copies through the host

// Note [fake group]: a group of `size` ranks inside one process, as c10d's FakeProcessGroup,
// so the engine's N-rank arithmetic (shards, padding, averaging, byte counts) runs in unit
// tests. Semantics: every peer contributes exactly what this rank contributes, and nothing
// ever waits or times out.
//   all_reduce:     sum -> buf * size; avg -> buf; max -> buf
//   reduce_scatter: out = this rank's slice of in; times size for sum
//   all_gather:     every slice of out = in
//   broadcast, barrier: no-op (the root already holds what every rank holds)
//   split:          every peer picks this rank's color and key, so the group is (rank, size)
// 16-bit products round once (fp32 multiply, then round); byte counts, sequence numbers and
// checks are those of the real backends. backend() is "fake".
GroupPtr make_fake_group(int rank, int size);

}  // namespace zt::comm
