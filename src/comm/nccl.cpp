// The "nccl" backend: one rank per GPU, collectives on the group's own stream (Note [nccl backend]).
//
// Note [nccl backend]: each group owns a non-blocking communicator (config.blocking = 0), so no
// NCCL call can block the host for good: a call answering ncclInProgress is polled with
// ncclCommGetAsyncError until it settles, at most the call's timeout, and a timeout or an
// asynchronous error aborts the communicator (ncclCommAbort ends its kernels) and throws
// ErrorKind::comm naming the collective. A collective is enqueued on the group's stream after an
// event recorded on the device's compute stream (so it reads what the ops before it wrote), and
// records a done event that Work::wait() polls from the host and Work::synchronize() makes the
// compute stream wait on. Buffers stay referenced by the Work until it completes or the compute
// stream is ordered after it, since the caching allocator hands freed blocks to the compute
// stream (Note [device streams]).
// Known gap: after synchronize() (or a Work dropped unfinished) the compute stream itself waits
// on the collective, and nothing watches that wait: if a peer dies then, the host's next
// synchronize(device) blocks without a timeout. A watchdog thread aborting the communicator past
// the deadline (as c10d's) would close it.
//
// Note [one GPU per rank]: NCCL refuses two ranks of one communicator on one GPU ("Duplicate GPU
// detected", ncclInvalidUsage; its docs: not supported, may hang), and has no supported way
// around it. So ranks first exchange host name and PCI bus id through the store and every rank
// throws the same clear error before NCCL is involved.
#include <cuda_runtime.h>
#include <nccl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <set>
#include <thread>
#include <vector>

#include "comm_detail.h"
#include "zt/comm/store.h"
#include "zt/core/affinity.h"
#include "zt/core/device.h"

namespace zt::comm {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::string secs(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", s);
  return buf;
}

// Polling: yield at first (collectives often finish within microseconds), then short sleeps.
void backoff(int& polls) {
  if (++polls < 200) return std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::microseconds(polls < 2000 ? 20 : 200));
}

void check_cuda(cudaError_t e, const char* call, int device, const std::string& where = "") {
  if (e == cudaSuccess) return;
  cudaGetLastError();  // clear a non-sticky error
  ZT_THROW_AS(e == cudaErrorMemoryAllocation ? ErrorKind::out_of_memory : ErrorKind::internal, "[comm] ", where,
              where.empty() ? "" : ": ", call, " failed on ", Device::cuda(device), ": ", cudaGetErrorString(e));
}

std::string nccl_error(ncclComm_t c, ncclResult_t r) {
  std::string s = ncclGetErrorString(r);
  const char* last = ncclGetLastError(c);
  if (last && *last) s += std::string(" (") + last + ")";
  return s;
}

// Makes `device` current for a scope, restoring the caller's; never throws in the destructor.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) : device_(device) {
    if (cudaGetDevice(&prev_) != cudaSuccess) prev_ = -1;
    if (prev_ != device_) check_cuda(cudaSetDevice(device_), "cudaSetDevice", device_);
  }
  ~DeviceGuard() {
    if (prev_ >= 0 && prev_ != device_) cudaSetDevice(prev_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int device_, prev_ = -1;
};

// A communicator and its stream, shared by its group and the Work in flight on it.
struct Comm {
  ncclComm_t c = nullptr;  // null once aborted
  int device = 0;
  cudaStream_t stream = nullptr;   // the group's communication stream
  cudaStream_t compute = nullptr;  // the device's compute stream (Note [device streams])
  std::string aborted;             // why, once aborted

  Comm(ncclComm_t comm, int dev) : c(comm), device(dev) {
    try {
      compute = static_cast<cudaStream_t>(device_stream(Device::cuda(dev)));
      DeviceGuard guard(dev);
      check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags", dev);
    } catch (...) {
      ncclCommAbort(c);  // the destructor will not run
      throw;
    }
  }

  // Finalize flushes what is in flight; bounded, so a dead peer cannot hang the exit.
  ~Comm() {
    int prev = -1;
    if (cudaGetDevice(&prev) == cudaSuccess && prev != device) cudaSetDevice(device);
    if (c) {
      ncclResult_t state = ncclCommFinalize(c);
      const auto start = Clock::now();
      for (int polls = 0; state == ncclInProgress && seconds_since(start) < 10.0; backoff(polls))
        if (ncclCommGetAsyncError(c, &state) != ncclSuccess) state = ncclInternalError;
      if (state == ncclSuccess)
        ncclCommDestroy(c);
      else
        ncclCommAbort(c);
    }
    if (stream) cudaStreamDestroy(stream);
    if (prev >= 0 && prev != device) cudaSetDevice(prev);
  }
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;

  void abort_comm(const std::string& why) {
    if (aborted.empty()) aborted = why;
    if (!c) return;
    DeviceGuard guard(device);
    ncclCommAbort(c);
    c = nullptr;
  }

  void check_alive(const std::string& where) const {
    ZT_CHECK_AS(ErrorKind::comm, c != nullptr, "[comm] ", where,
                ": the nccl communicator was aborted earlier: ", aborted);
  }

  // The communicator's state: ncclSuccess, or ncclInProgress while a non-blocking call is still
  // being enqueued (Note [nccl backend]); an asynchronous error (a peer's failure, the network)
  // aborts and throws.
  ncclResult_t state(const std::string& where) {
    check_alive(where);
    ncclResult_t st = ncclSuccess;
    const ncclResult_t r = ncclCommGetAsyncError(c, &st);
    if (r != ncclSuccess) st = r;
    if (st == ncclSuccess || st == ncclInProgress) return st;
    const std::string msg = "[comm] " + where + ": nccl failed: " + nccl_error(c, st);
    abort_comm(msg);
    ZT_THROW_AS(ErrorKind::comm, msg, "; the communicator was aborted");
  }

  // Waits for a non-blocking call to leave ncclInProgress, at most timeout_s, then aborts.
  void settle(double timeout_s, const std::string& where, const std::function<std::string()>& timeout_msg) {
    const auto start = Clock::now();
    for (int polls = 0; state(where) == ncclInProgress; backoff(polls)) {
      if (seconds_since(start) > timeout_s) {
        const std::string msg = timeout_msg();
        abort_comm(msg);
        ZT_THROW_AS(ErrorKind::comm, msg);
      }
    }
  }
};

std::string aborted_why() { return "a peer stalled or died (nccl cannot tell which); the communicator was aborted"; }

class NcclWork : public Work {
 public:
  NcclWork(std::shared_ptr<Comm> comm, cudaEvent_t done, Coll coll, uint64_t seq, int rank, int size, double timeout,
           std::string label, std::vector<Tensor> keep)
      : Work(seq),
        comm_(std::move(comm)),
        done_event_(done),
        coll_(coll),
        rank_(rank),
        size_(size),
        timeout_(timeout),
        label_(std::move(label)),
        keep_(std::move(keep)) {}

  ~NcclWork() override {
    if (!done_ && !ordered_) {
      if (comm_->c) {
        cudaStreamWaitEvent(comm_->compute, done_event_, 0);  // blocks freed now are reused after it
      } else {
        new std::vector<Tensor>(std::move(keep_));  // aborted mid-flight: leaked on purpose
      }
    }
    cudaEventDestroy(done_event_);
  }

  bool test() override {
    if (done_) return true;
    comm_->state(name());
    const cudaError_t e = cudaEventQuery(done_event_);
    if (e == cudaErrorNotReady) return false;
    check_cuda(e, "cudaEventQuery", comm_->device, name());
    done_ = true;
    keep_.clear();
    return true;
  }

  void wait() override {
    const auto start = Clock::now();
    for (int polls = 0; !test(); backoff(polls)) {
      if (seconds_since(start) > timeout_) {
        blocked_s_ += seconds_since(start);
        const std::string msg = detail::timeout_message(coll_, seq(), timeout_, rank_, size_, label_, aborted_why());
        comm_->abort_comm(msg);
        ZT_THROW_AS(ErrorKind::comm, msg);
      }
    }
    blocked_s_ += seconds_since(start);
  }

  void synchronize() override {
    if (done_ || ordered_) return;
    comm_->state(name());
    check_cuda(cudaStreamWaitEvent(comm_->compute, done_event_, 0), "cudaStreamWaitEvent", comm_->device, name());
    ordered_ = true;
    keep_.clear();  // the compute stream now runs after the collective: freed blocks are safe to reuse
  }

  double blocked_seconds() const override { return blocked_s_; }

 private:
  std::string name() const { return detail::call_name(coll_, seq(), label_); }

  std::shared_ptr<Comm> comm_;
  cudaEvent_t done_event_;
  Coll coll_;
  int rank_, size_;
  double timeout_;
  std::string label_;
  std::vector<Tensor> keep_;  // the collective's buffers, until it completes or is ordered
  bool done_ = false, ordered_ = false;
  double blocked_s_ = 0;
};

ncclDataType_t nccl_dtype(DType d) {
  switch (d) {
    case DType::f32:
      return ncclFloat32;
    case DType::bf16:
      return ncclBfloat16;
    case DType::f16:
      return ncclFloat16;
    case DType::i32:
      return ncclInt32;
    case DType::i64:
      return ncclInt64;
  }
  ZT_THROW("[comm] dtype ", dtype_name(d), " has no NCCL type");
}

// avg is NCCL's own (floating types only, checked before): it scales by 1/size while reducing.
ncclRedOp_t nccl_op(ReduceOp op) { return op == ReduceOp::max ? ncclMax : op == ReduceOp::avg ? ncclAvg : ncclSum; }

// Every host holding the same number of consecutive ranks: that number, else 1 (Group::local_size).
int ranks_per_host(const std::vector<std::string>& hosts) {
  const size_t n = hosts.size();
  size_t k = 1;
  while (k < n && hosts[k] == hosts[0]) ++k;
  if (n % k) return 1;
  std::set<std::string> seen;
  for (size_t i = 0; i < n; ++i) {
    if (hosts[i] != hosts[i / k * k]) return 1;
    if (i % k == 0 && !seen.insert(hosts[i]).second) return 1;
  }
  return int(k);
}

class NcclGroup : public Group {
 public:
  NcclGroup(std::shared_ptr<Comm> comm, int rank, int size, std::vector<std::string> hosts, GroupPtr bootstrap)
      : comm_(std::move(comm)),
        rank_(rank),
        size_(size),
        hosts_(std::move(hosts)),
        local_size_(ranks_per_host(hosts_)),
        bootstrap_(std::move(bootstrap)) {}

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* backend() const override { return "nccl"; }
  Device device() const override { return Device::cuda(comm_->device); }
  int local_size() const override { return local_size_; }
  uint64_t cross_node_bytes() const override { return local_size_ == size_ ? 0 : stats().total_bytes(); }

  // Collective over this group (ncclCommSplit), like MPI_Comm_split.
  std::shared_ptr<Group> split(int color, int key) override {
    ZT_CHECK(color >= 0, "[comm] split: color ", color, " must be >= 0");  // NCCL_SPLIT_NOCOLOR is negative
    auto sub = split_comm(color, key);
    int rank = 0, size = 0;
    ncclCommUserRank(sub->c, &rank);
    ncclCommCount(sub->c, &size);
    // Which of our ranks the new group holds, in its order: its hosts, for local_size().
    auto g = std::make_shared<NcclGroup>(sub, rank, size, std::vector<std::string>(size_t(size)), bootstrap_);
    g->set_timeout(timeout());
    g->set_check_collectives(check_collectives());
    const std::vector<int32_t> old_ranks = g->gather_int(rank_);
    std::vector<std::string> hosts;
    for (int32_t r : old_ranks) hosts.push_back(hosts_.at(size_t(r)));
    g->hosts_ = std::move(hosts);
    g->local_size_ = ranks_per_host(g->hosts_);
    return g;
  }

  // A communicator of this group's ranks of `color` (collective over the group), on a stream of its own.
  std::shared_ptr<Comm> split_comm(int color, int key) {
    comm_->state("split");
    // NCCL writes the new communicator into *slot when the split completes in the background (on
    // the parent's progress): heap memory, left behind if we give up before then.
    auto* slot = new ncclComm_t(nullptr);
    {
      DeviceGuard guard(comm_->device);
      const ncclResult_t r = ncclCommSplit(comm_->c, color, key, slot, nullptr);  // inherits blocking = 0
      if (r != ncclSuccess && r != ncclInProgress) {
        const std::string msg = "[comm] split: ncclCommSplit failed: " + nccl_error(comm_->c, r);
        comm_->abort_comm(msg);
        ZT_THROW_AS(ErrorKind::comm, msg);
      }
    }
    auto split_timeout = [this] {
      return "[comm] split timed out after " + secs(timeout()) + " s on rank " + std::to_string(rank_) + " of " +
             std::to_string(size_) + ": " + aborted_why();
    };
    comm_->settle(timeout(), "split", split_timeout);
    const ncclComm_t child = *slot;
    delete slot;
    ZT_CHECK_AS(ErrorKind::comm, child != nullptr, "[comm] split: ncclCommSplit returned no communicator");
    auto sub = std::make_shared<Comm>(child, comm_->device);
    sub->settle(timeout(), "split", split_timeout);
    return sub;
  }

  // Under mpirun (an MPI bootstrap) MPI_Abort ends every rank; else the peers see the abort as
  // a failed collective, and the caller gets an error to exit on.
  void abort_job(int code) override {
    if (bootstrap_) bootstrap_->abort_job(code);
    comm_->abort_comm("abort_job(" + std::to_string(code) + ")");
    ZT_THROW_AS(ErrorKind::comm, "[comm] abort_job(", code, ") on rank ", rank_, " of ", size_,
                ": aborted the nccl communicator (no MPI launcher to end the other ranks)");
  }

 protected:
  WorkPtr do_all_reduce(Tensor& buf, const Call& c) override {
    if (buf.numel() == 0) return detail::done_work(c.seq);
    void* p = buf.raw_data();
    return launch(c, {buf}, [&](ncclComm_t comm, cudaStream_t s) {
      return ncclAllReduce(p, p, size_t(buf.numel()), nccl_dtype(buf.dtype()), nccl_op(c.op), comm, s);
    });
  }

  // In place when `out` is this rank's chunk of `in`; any other overlap is staged.
  WorkPtr do_reduce_scatter(const Tensor& in, Tensor& out, const Call& c) override {
    if (out.numel() == 0) return detail::done_work(c.seq);
    const char* own = static_cast<const char*>(in.raw_data()) + size_t(rank_) * out.nbytes();
    const Tensor src = detail::overlaps(in, out) && out.raw_data() != own ? in.clone(MemTag::comm) : in;
    return launch(c, {src, out}, [&](ncclComm_t comm, cudaStream_t s) {
      return ncclReduceScatter(src.raw_data(), out.raw_data(), size_t(out.numel()), nccl_dtype(in.dtype()),
                               nccl_op(c.op), comm, s);
    });
  }

  // In place when `in` is this rank's chunk of `out` (ZeRO's shard views); any other overlap is staged.
  WorkPtr do_all_gather(const Tensor& in, Tensor& out, const Call& c) override {
    if (in.numel() == 0) return detail::done_work(c.seq);
    const char* own = static_cast<const char*>(out.raw_data()) + size_t(rank_) * in.nbytes();
    const Tensor src = detail::overlaps(in, out) && in.raw_data() != own ? in.clone(MemTag::comm) : in;
    return launch(c, {src, out}, [&](ncclComm_t comm, cudaStream_t s) {
      return ncclAllGather(src.raw_data(), out.raw_data(), size_t(in.numel()), nccl_dtype(in.dtype()), comm, s);
    });
  }

  WorkPtr do_broadcast(Tensor& buf, int root, const Call& c) override {
    if (buf.numel() == 0) return detail::done_work(c.seq);
    void* p = buf.raw_data();
    return launch(c, {buf}, [&](ncclComm_t comm, cudaStream_t s) {
      return ncclBroadcast(p, p, size_t(buf.numel()), nccl_dtype(buf.dtype()), root, comm, s);
    });
  }

  WorkPtr do_barrier(const Call& c) override {
    if (!barrier_buf_.defined()) {
      barrier_buf_ = Tensor::empty({1}, DType::f32, MemTag::comm, device());
      barrier_buf_.zero_();
    }
    void* p = barrier_buf_.raw_data();
    return launch(c, {barrier_buf_}, [&](ncclComm_t comm, cudaStream_t s) {
      return ncclAllReduce(p, p, 1, ncclFloat32, ncclMax, comm, s);  // max: stays 0, however many run
    });
  }

  // Grouped sends and receives, chunk r to and from rank r (input and output never overlap).
  WorkPtr do_all_to_all(const Tensor& in, Tensor& out, const Call& c) override {
    if (in.numel() == 0) return detail::done_work(c.seq);
    const size_t k = size_t(in.numel()) / size_t(size_), chunk = k * dtype_size(in.dtype());
    const ncclDataType_t dt = nccl_dtype(in.dtype());
    return launch(c, {in, out}, [&](ncclComm_t comm, cudaStream_t s) {
      // Inside a group NCCL reports in-progress only at its end; accept it anyway, so no peer is skipped.
      auto ok = [](ncclResult_t x) { return x == ncclSuccess || x == ncclInProgress; };
      ncclResult_t r = ncclGroupStart();
      for (int peer = 0; peer < size_ && ok(r); ++peer) {
        r = ncclSend(static_cast<const char*>(in.raw_data()) + peer * chunk, k, dt, peer, comm, s);
        if (ok(r)) r = ncclRecv(static_cast<char*>(out.raw_data()) + peer * chunk, k, dt, peer, comm, s);
      }
      const ncclResult_t end = ncclGroupEnd();
      return ok(r) ? end : r;
    });
  }

  WorkPtr do_send(const Tensor& buf, int peer, const Call& c) override {
    if (buf.numel() == 0) return detail::done_work(c.seq);
    return launch(c, {buf}, [&](ncclComm_t comm, cudaStream_t s) {
      return ncclSend(buf.raw_data(), size_t(buf.numel()), nccl_dtype(buf.dtype()), peer, comm, s);
    });
  }

  WorkPtr do_recv(Tensor& buf, int peer, const Call& c) override {
    if (buf.numel() == 0) return detail::done_work(c.seq);
    return launch(c, {buf}, [&](ncclComm_t comm, cudaStream_t s) {
      return ncclRecv(buf.raw_data(), size_t(buf.numel()), nccl_dtype(buf.dtype()), peer, comm, s);
    });
  }

 private:
  using Op = std::function<ncclResult_t(ncclComm_t, cudaStream_t)>;

  // Note [nccl backend]: compute stream -> event -> comm stream, the NCCL call (settled), done event.
  WorkPtr launch(const Call& c, std::vector<Tensor> keep, const Op& op) {
    const std::string where = detail::call_name(c.coll, c.seq, c.label);
    comm_->state(where);
    DeviceGuard guard(comm_->device);
    check_signatures(c, where);
    cudaEvent_t ready = nullptr, done = nullptr;
    check_cuda(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming), "cudaEventCreateWithFlags", comm_->device,
               where);
    cudaError_t e = cudaEventRecord(ready, comm_->compute);
    if (e == cudaSuccess) e = cudaStreamWaitEvent(comm_->stream, ready, 0);
    cudaEventDestroy(ready);  // released once the wait is satisfied
    check_cuda(e, "ordering after the compute stream", comm_->device, where);

    const ncclResult_t r = op(comm_->c, comm_->stream);
    if (r != ncclSuccess && r != ncclInProgress) {
      const std::string msg = "[comm] " + where + ": nccl failed: " + nccl_error(comm_->c, r);
      comm_->abort_comm(msg);  // this rank is out of step with its peers now
      ZT_THROW_AS(ErrorKind::comm, msg, "; the communicator was aborted");
    }
    // The first call between two ranks connects them, so settling may wait for peers.
    comm_->settle(c.timeout_s, where, [&] {
      return detail::timeout_message(c.coll, c.seq, c.timeout_s, rank_, size_, c.label, aborted_why());
    });
    check_cuda(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), "cudaEventCreateWithFlags", comm_->device,
               where);
    e = cudaEventRecord(done, comm_->stream);
    if (e != cudaSuccess) cudaEventDestroy(done);
    check_cuda(e, "cudaEventRecord", comm_->device, where);
    return std::make_shared<NcclWork>(comm_, done, c.coll, c.seq, rank_, size_, c.timeout_s, c.label, std::move(keep));
  }

  // Note [collective signatures] on nccl: before a collective's data moves, every rank's signature
  // is all-gathered on a second communicator of the group (split at the first checked collective)
  // on its own stream, which waits for nothing on the compute stream: the host waits only for its
  // peers to launch a call (at most the call's timeout) and compares; a mismatch aborts the group's
  // communicator and every rank throws the same line. Its cost, a 128-byte all-gather and a host
  // round trip per collective, is what run.check_collectives=false saves.
  struct Signatures {
    std::shared_ptr<Comm> comm;
    Tensor all;                     // on the device: every rank's signature, in rank order
    CallSignature* host = nullptr;  // pinned: the same, read back
    cudaEvent_t read = nullptr;
    ~Signatures() {
      if (read) cudaEventDestroy(read);
      if (host) cudaFreeHost(host);
    }
  };

  void check_signatures(const Call& c, const std::string& where) {
    if (!check_collectives() || size_ == 1 || c.seq == 0 || c.coll == Coll::send || c.coll == Coll::recv) return;
    if (!sigs_) {
      auto s = std::make_unique<Signatures>();
      s->comm = split_comm(0, rank_);
      s->all = Tensor::empty({int64_t(size_) * 16}, DType::i64, MemTag::comm, device());
      check_cuda(cudaMallocHost(reinterpret_cast<void**>(&s->host), sizeof(CallSignature) * size_t(size_)),
                 "cudaMallocHost", comm_->device, where);
      check_cuda(cudaEventCreateWithFlags(&s->read, cudaEventDisableTiming), "cudaEventCreateWithFlags",
                 comm_->device, where);
      sigs_ = std::move(s);
    }
    Signatures& s = *sigs_;
    static_assert(sizeof(CallSignature) == 16 * sizeof(int64_t));
    char* all = static_cast<char*>(s.all.raw_data());
    char* mine = all + size_t(rank_) * sizeof(CallSignature);
    s.host[rank_] = c.sig;
    const std::string sig_where = where + ", its signature";
    check_cuda(cudaMemcpyAsync(mine, &s.host[rank_], sizeof(CallSignature), cudaMemcpyHostToDevice, s.comm->stream),
               "cudaMemcpyAsync", comm_->device, sig_where);
    const ncclResult_t r = ncclAllGather(mine, all, 16, ncclInt64, s.comm->c, s.comm->stream);
    if (r != ncclSuccess && r != ncclInProgress) {
      const std::string msg = "[comm] " + sig_where + ": nccl failed: " + nccl_error(s.comm->c, r);
      s.comm->abort_comm(msg);
      comm_->abort_comm(msg);
      ZT_THROW_AS(ErrorKind::comm, msg, "; the communicator was aborted");
    }
    auto timed_out = [&] {
      const std::string msg = detail::timeout_message(c.coll, c.seq, c.timeout_s, rank_, size_, c.label, aborted_why());
      s.comm->abort_comm(msg);
      comm_->abort_comm(msg);
      return msg;
    };
    s.comm->settle(c.timeout_s, sig_where, timed_out);
    check_cuda(cudaMemcpyAsync(s.host, all, sizeof(CallSignature) * size_t(size_), cudaMemcpyDeviceToHost,
                               s.comm->stream),
               "cudaMemcpyAsync", comm_->device, sig_where);
    check_cuda(cudaEventRecord(s.read, s.comm->stream), "cudaEventRecord", comm_->device, sig_where);
    const auto start = Clock::now();
    for (int polls = 0;; backoff(polls)) {
      s.comm->state(sig_where);
      const cudaError_t e = cudaEventQuery(s.read);
      if (e == cudaSuccess) break;
      if (e != cudaErrorNotReady) check_cuda(e, "cudaEventQuery", comm_->device, sig_where);
      if (seconds_since(start) > c.timeout_s) ZT_THROW_AS(ErrorKind::comm, timed_out());
    }
    if (std::string why = signature_mismatch(s.host, size_); !why.empty()) {
      s.comm->abort_comm(why);
      comm_->abort_comm(why);  // its peers may have posted theirs: nothing of this group runs again
      ZT_THROW_AS(ErrorKind::comm, why);
    }
  }

  // Every rank's `v`, in rank order: an all_gather outside the numbered collectives and stats.
  std::vector<int32_t> gather_int(int32_t v) {
    Tensor mine = Tensor::full({1}, float(v), DType::i32, device());
    Tensor all = Tensor::empty({int64_t(size_)}, DType::i32, MemTag::comm, device());
    do_all_gather(mine, all, Call{Coll::all_gather, ReduceOp::sum, 0, timeout(), "split", {}})->wait();
    const Tensor host = all.to(Device::cpu());
    return std::vector<int32_t>(host.data<int32_t>(), host.data<int32_t>() + size_);
  }

  std::shared_ptr<Comm> comm_;
  int rank_, size_;
  std::vector<std::string> hosts_;  // each rank's host name, for local_size()
  int local_size_;
  GroupPtr bootstrap_;  // the MPI group that launched us, if any (abort_job)
  Tensor barrier_buf_;
  std::unique_ptr<Signatures> sigs_;  // Note [collective signatures] on nccl; made at the first check
};

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown-host";
  return buf;
}

std::string store_key(const std::string& prefix, const std::string& name) {
  return prefix.empty() ? name : prefix + "." + name;
}

// Note [one GPU per rank]: "host\nbus id" from every rank, in rank order (Note [store order]).
std::vector<std::string> exchange_gpus(int rank, int size, int device, Store& store, const std::string& prefix,
                                       double timeout_s) {
  char bus[64] = {};
  check_cuda(cudaDeviceGetPCIBusId(bus, sizeof bus - 1, device), "cudaDeviceGetPCIBusId", device, "nccl init");
  const std::string mine = host_name() + "\n" + bus;
  std::vector<std::string> all(static_cast<size_t>(size));
  for (int r = 0; r < size; ++r) {
    const std::string key = store_key(prefix, "gpu." + std::to_string(r));
    if (r == rank) {
      store.set(key, mine);
      all[size_t(r)] = mine;
    } else {
      all[size_t(r)] = store.get(key, timeout_s);
    }
  }
  for (int i = 0; i < size; ++i) {
    for (int j = i + 1; j < size; ++j) {
      if (all[size_t(i)] != all[size_t(j)]) continue;
      const std::string& w = all[size_t(i)];
      const size_t nl = w.find('\n');
      ZT_THROW_AS(ErrorKind::comm, "[comm] nccl: ranks ", i, " and ", j, " both use the GPU at PCI bus ",
                  w.substr(nl + 1), " on host ", w.substr(0, nl),
                  "; NCCL needs one GPU per rank: start at most as many ranks per host as it has GPUs (",
                  cuda_device_count(), " visible here), check CUDA_VISIBLE_DEVICES, or use backend mpi or shm");
    }
  }
  return all;
}

GroupPtr init_group(int rank, int size, int device, Store& store, const std::string& prefix, double timeout_s,
                    GroupPtr bootstrap) {
  ZT_CHECK(size >= 1 && rank >= 0 && rank < size, "[comm] nccl: rank ", rank, " is outside the group [0, ", size, ")");
  ZT_CHECK(timeout_s > 0, "[comm] nccl: timeout must be positive, got ", timeout_s, " s");
  ZT_CHECK_AS(ErrorKind::comm, is_available(Device::cuda(device)), "[comm] nccl: rank ", rank, " needs ",
              Device::cuda(device), ", but this process sees ", cuda_device_count(), " GPU(s)");
  std::vector<std::string> gpus = exchange_gpus(rank, size, device, store, prefix, timeout_s);
  std::vector<std::string> hosts;
  for (const std::string& g : gpus) hosts.push_back(g.substr(0, g.find('\n')));

  ncclUniqueId id;
  const std::string id_key = store_key(prefix, "nccl_id");
  if (rank == 0) {
    const ncclResult_t r = ncclGetUniqueId(&id);
    ZT_CHECK_AS(ErrorKind::comm, r == ncclSuccess, "[comm] nccl: ncclGetUniqueId failed: ", nccl_error(nullptr, r));
    store.set(id_key, std::string(id.internal, sizeof id.internal));
  } else {
    const std::string v = store.get(id_key, timeout_s);
    ZT_CHECK_AS(ErrorKind::comm, v.size() == sizeof id.internal, "[comm] nccl: the store's '", id_key, "' has ",
                v.size(), " bytes, not a unique id's ", sizeof id.internal);
    std::memcpy(id.internal, v.data(), v.size());
  }

  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // Note [nccl backend]
  // The rank's GPU becomes the calling thread's current device, as a framework's set_device does.
  check_cuda(cudaSetDevice(device), "cudaSetDevice", device, "nccl init");
  ncclComm_t c = nullptr;
  const ncclResult_t r = ncclCommInitRankConfig(&c, size, id, rank, &config);
  const std::string where = "nccl init on rank " + std::to_string(rank) + " of " + std::to_string(size) + " (" +
                            Device::cuda(device).str() + ")";
  if (r != ncclSuccess && r != ncclInProgress) {
    const std::string why = nccl_error(c, r);
    if (c) ncclCommAbort(c);
    ZT_THROW_AS(ErrorKind::comm, "[comm] ", where, ": ", why);
  }
  auto comm = std::make_shared<Comm>(c, device);
  comm->settle(timeout_s, where, [&] {
    return "[comm] " + where + " timed out after " + secs(timeout_s) +
           " s: a peer did not join (stalled, died, or read another run's unique id from the store)";
  });
  auto g = std::make_shared<NcclGroup>(std::move(comm), rank, size, std::move(hosts), std::move(bootstrap));
  g->set_timeout(timeout_s);
  return g;
}

}  // namespace

bool nccl_available() { return true; }

GroupPtr make_nccl_group(int rank, int size, int device, Store& store, const std::string& prefix, double timeout_s) {
  return init_group(rank, size, device, store, prefix, timeout_s, nullptr);
}

namespace detail {

// Rendezvous over MPI under mpirun (Note [store order]); one GPU per local rank.
GroupPtr make_launched_nccl_group() {
  const int gpus = cuda_device_count();
  ZT_CHECK_AS(ErrorKind::comm, gpus > 0, "[comm] backend 'nccl' needs a GPU, and this process sees none");
  GroupPtr boot = launched_by_mpirun() ? make_mpi_group() : make_local_group();
  auto store = make_group_store(boot);
  const int gpu = local_rank_from_env().rank % gpus;  // the GPU run.device=cuda picked (apps/session.cpp)
  return init_group(boot->rank(), boot->size(), gpu, *store, "world", boot->timeout(), boot);
}

}  // namespace detail
}  // namespace zt::comm
