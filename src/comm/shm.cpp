// Note [shm backend]: ranks on one node talk through one shared segment per group (set up over
// MPI; Note [shm segment layout]). A communication thread per group runs the collectives in
// launch order, so they progress while the caller computes; Work::wait() sleeps on a condition
// variable. Large tensors stream through each rank's double-buffered slot in chunks; every
// chunk ends at a sync point (post + wait for all peers), and a buffer is rewritten only two
// chunks later, after every peer has passed the next sync point, i.e. has finished reading it.
//   reduce_scatter: each rank copies the slices peers own into its slot; each then reduces its
//                   own slice reading every slot, in rank order 0..N-1 (deterministic, fp32).
//   all_reduce:     the same on the chunk's N parts, each part's result written back to its
//                   reducer's slot; after the next sync point every rank copies the others'.
//   all_gather, broadcast: copies in, sync point, copies out.  barrier: one sync point.
// An all_gather or broadcast larger than one slot reads peers' buffers in place instead when it
// can (Note [shm single copy] in shm_direct.h).
// Note [shm all_reduce]: chunk s's inputs and chunk s-1's results share one sync point, so
// there are chunks + 1 of them, not 2 x chunks. Part q of every chunk is [q*per, (q+1)*per)
// (clamped), the same for all chunks, so writing chunk s+2's inputs (every part but our own)
// never touches our results of chunk s, which peers may still be copying.
// A failure (timeout, a peer that left, died or broke) breaks the group: queued and later
// collectives fail at once, peers learn it from this rank's words, and MPI_Finalize is skipped.
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "mpi_runtime.h"
#include "shm_direct.h"
#include "shm_reduce.h"
#include "shm_segment.h"

namespace zt::comm {

bool shm_available() { return true; }

namespace detail {
namespace {

constexpr size_t kDefaultSlotBytes = size_t(1) << 20;

double seconds(ShmClock::duration d) { return std::chrono::duration<double>(d).count(); }

ShmClock::time_point deadline_after(double s) {
  return ShmClock::now() + std::chrono::duration_cast<ShmClock::duration>(
                               std::chrono::duration<double>(std::min(s, 1e7)));  // no overflow
}

// State shared by the group, its thread and its Works (which may outlive the group).
struct ShmState {
  std::unique_ptr<ShmSegment> seg;
  std::atomic<bool> stop{false};  // broken or closing: the running collective gives up
  std::mutex mu;
  std::string broken;  // the first failure; later calls fail with it

  // Marks the group broken (once) and tells the peers at which collective.
  void fail(uint64_t seq, const std::string& why) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (!broken.empty()) return;
      broken = why;
    }
    stop.store(true);
    seg->line(seg->rank()).failed_seq.store(seq);
    mpi_skip_finalize("a shm collective failed, so a peer may be stalled");
  }
  std::string broken_message() {
    std::lock_guard<std::mutex> lock(mu);
    return broken;
  }
};

class ShmWork : public Work {
 public:
  ShmWork(Coll coll, ReduceOp op, uint64_t seq, double timeout_s, std::string label, const CallSignature* sig,
          std::vector<Tensor> t, int root, std::shared_ptr<ShmState> st)
      : Work(seq),
        coll(coll),
        op(op),
        timeout_s(timeout_s),
        label(std::move(label)),
        sig(sig ? *sig : CallSignature{}),
        check(sig != nullptr),
        t(std::move(t)),
        root(root),
        st_(std::move(st)) {}

  const Coll coll;
  const ReduceOp op;
  const double timeout_s;
  const std::string label;
  const CallSignature sig;  // Note [collective signatures]
  const bool check;         // compare sig with the peers' (run.check_collectives)
  std::vector<Tensor> t;    // the buffers, alive until the collective ends
  const int root;

  void wait() override {
    const auto start = ShmClock::now();
    std::unique_lock<std::mutex> lock(mu_);
    const bool ended = cv_.wait_until(lock, deadline_after(timeout_s), [&] { return state_ >= kDone; });
    blocked_s_ += seconds(ShmClock::now() - start);
    if (!ended) {
      const ShmSegment& seg = *st_->seg;
      error_ = timeout_message(coll, seq(), timeout_s, seg.rank(), seg.size(), label, not_arrived(seg.not_arrived()));
      state_ = kFailed;
      lock.unlock();
      st_->fail(seq(), error_);  // the comm thread drops this collective within a futex slice
      ZT_THROW_AS(ErrorKind::comm, error_);
    }
    if (state_ == kFailed) ZT_THROW_AS(ErrorKind::comm, error_);
  }

  bool test() override {
    std::lock_guard<std::mutex> lock(mu_);
    if (state_ == kFailed) ZT_THROW_AS(ErrorKind::comm, error_);
    return state_ == kDone;
  }

  double busy_seconds() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return state_ == kDone ? seconds(finished_ - started_) : 0.0;
  }
  double blocked_seconds() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return blocked_s_;
  }

  // Called by the comm thread.
  void started() { started_ = ShmClock::now(); }
  bool failed() {
    std::lock_guard<std::mutex> lock(mu_);
    return state_ == kFailed;
  }
  void finish(const std::string* error) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (state_ != kPending) return;  // wait() gave up first: its timeout message stays
      finished_ = ShmClock::now();
      state_ = error ? kFailed : kDone;
      if (error) error_ = *error;
      t.clear();
    }
    cv_.notify_all();
  }

 private:
  enum State { kPending, kDone, kFailed };
  std::shared_ptr<ShmState> st_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  State state_ = kPending;
  std::string error_;
  ShmClock::time_point started_, finished_;
  double blocked_s_ = 0;
};

// Runs one group's collectives on its own thread, in launch order.
class ShmEngine {
 public:
  explicit ShmEngine(std::shared_ptr<ShmState> st)
      : st_(std::move(st)), seg_(*st_->seg), rank_(seg_.rank()), size_(seg_.size()), thread_([this] { loop(); }) {}

  ~ShmEngine() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      closing_ = true;
      if (!queue_.empty() || running_) st_->fail(UINT64_MAX, "[comm] shm group destroyed with collectives in flight");
    }
    cv_.notify_all();
    thread_.join();
  }

  void push(std::shared_ptr<ShmWork> w) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(std::move(w));
    }
    cv_.notify_one();
  }

 private:
  void loop() {
    for (;;) {
      std::shared_ptr<ShmWork> w;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return closing_ || !queue_.empty(); });
        if (queue_.empty()) return;
        w = std::move(queue_.front());
        queue_.pop_front();
        running_ = true;
      }
      std::string error;
      const bool ok = run_one(*w, error);
      {
        std::lock_guard<std::mutex> lock(mu_);
        running_ = false;  // before finish(): once waited for, the group may be destroyed at once
      }
      w->finish(ok ? nullptr : &error);
    }
  }

  bool run_one(ShmWork& w, std::string& error) {
    std::string broken = st_->broken_message();
    if (!broken.empty()) {
      error = "[comm] " + call_name(w.coll, w.seq(), w.label) + " not run: the group broke: " + broken;
      return false;
    }
    if (w.failed()) return true;  // wait() gave up on it already; its error stays
    w.started();
    try {
      check_peers_healthy(w);
      run(w);
      return true;
    } catch (const Error& e) {
      error = e.what();
      st_->fail(w.seq(), error);
      return false;
    }
  }

  // A peer that broke at this collective or before will never join it.
  void check_peers_healthy(const ShmWork& w) {
    for (int q = 0; q < size_; ++q) {
      const uint64_t failed = seg_.line(q).failed_seq.load();
      if (q != rank_ && failed != 0 && failed <= w.seq())
        ZT_THROW_AS(ErrorKind::comm, "[comm] ", call_name(w.coll, w.seq(), w.label), " failed on rank ", rank_, " of ",
                    size_, ": rank ", q, " gave up on the group at #", failed, " after a failure");
    }
  }

  void run(ShmWork& w) {
    ShmWaitFor wf{w.coll, w.seq(), w.label, w.timeout_s, deadline_after(w.timeout_s), st_->stop};
    if (w.check) seg_.expect(w.sig);
    switch (w.coll) {
      case Coll::all_reduce:
        return all_reduce(w.t[0], w.op, wf);
      case Coll::reduce_scatter:
        return reduce_scatter(w.t[0], w.t[1], w.op, wf);
      case Coll::all_gather:
        return all_gather(w.t[0], w.t[1], wf);
      case Coll::broadcast:
        return broadcast(w.t[0], w.root, wf);
      case Coll::barrier:
        return sync(wf);
      case Coll::all_to_all:  // Group::do_all_to_all runs it as an all_gather
      case Coll::send:        // point-to-point: not offered by shm (Group's default throws first)
      case Coll::recv:
        break;
    }
    ZT_ASSERT(false, "[comm] shm runs no ", coll_name(w.coll));
  }

  void sync(const ShmWaitFor& wf) { seg_.sync(wf); }
  // Note [shm single copy]: past one slot, when peers' memory can be read.
  bool direct(const Tensor& largest) const { return seg_.single_copy() && largest.nbytes() > seg_.slot_bytes(); }
  char* slot(int q) const { return seg_.slot(q, step_); }
  // Elements per chunk so that `parts` pieces fit a slot; a multiple of 16 (64-byte lines).
  int64_t chunk_elems(size_t esize, int parts) const {
    const int64_t c = int64_t(seg_.slot_bytes() / esize / size_t(parts));
    return c >= 16 ? c / 16 * 16 : std::max<int64_t>(c, 1);
  }
  static int64_t num_steps(int64_t n, int64_t chunk) { return std::max<int64_t>(1, (n + chunk - 1) / chunk); }

  void reduce_scatter(Tensor in, Tensor& out, ReduceOp op, const ShmWaitFor& wf) {
    const size_t es = dtype_size(in.dtype());
    const int64_t n = out.numel(), cmax = chunk_elems(es, size_);
    char* const own_in = static_cast<char*>(in.raw_data()) + size_t(rank_) * size_t(n) * es;
    // Reducing into our own slice of the input reads each element before writing it; any
    // other overlap would overwrite input still to be sent, so stage the input.
    if (overlaps(in, out) && out.raw_data() != own_in) in = in.clone(MemTag::comm);
    const char* src = static_cast<const char*>(in.raw_data());
    char* dst = static_cast<char*>(out.raw_data());
    std::vector<const void*> srcs(size_t(size_), nullptr);
    for (int64_t s = 0, steps = num_steps(n, cmax); s < steps; ++s, ++step_) {
      const int64_t off = s * cmax, c = std::min(cmax, n - off);
      for (int q = 0; q < size_; ++q)
        if (q != rank_) std::memcpy(slot(rank_) + size_t(q * c) * es, src + size_t(q * n + off) * es, size_t(c) * es);
      sync(wf);
      for (int p = 0; p < size_; ++p)
        srcs[size_t(p)] = p == rank_ ? src + size_t(rank_ * n + off) * es : slot(p) + size_t(rank_ * c) * es;
      reduce_elems(in.dtype(), op, srcs.data(), size_, dst + size_t(off) * es, nullptr, c);
    }
  }

  // Pipelined (Note [shm all_reduce]): one sync point per chunk plus one at the end.
  void all_reduce(Tensor& buf, ReduceOp op, const ShmWaitFor& wf) {
    const size_t es = dtype_size(buf.dtype());
    const int64_t total = buf.numel(), mmax = chunk_elems(es, 1);
    const int64_t per = ((mmax + size_ - 1) / size_ + 15) / 16 * 16;  // the same for every chunk
    char* data = static_cast<char*>(buf.raw_data());
    std::vector<const void*> srcs(size_t(size_), nullptr);
    // Copies the parts the peers reduced of the chunk at `off` (m elements, data step `step`).
    auto gather = [&](int64_t off, int64_t m, uint64_t step) {
      for (int q = 0; q < size_; ++q) {
        const int64_t qb = std::min(m, q * per), qe = std::min(m, (q + 1) * per);
        if (q != rank_)
          std::memcpy(data + size_t(off + qb) * es, seg_.slot(q, step) + size_t(qb) * es, size_t(qe - qb) * es);
      }
    };
    const int64_t steps = num_steps(total, mmax);
    for (int64_t s = 0; s < steps; ++s, ++step_) {
      const int64_t off = s * mmax, m = std::min(mmax, total - off);
      const int64_t b = std::min(m, rank_ * per), e = std::min(m, (rank_ + 1) * per);
      char* chunk = data + size_t(off) * es;
      std::memcpy(slot(rank_), chunk, size_t(b) * es);
      std::memcpy(slot(rank_) + size_t(e) * es, chunk + size_t(e) * es, size_t(m - e) * es);
      sync(wf);  // inputs of this chunk and results of the previous one are in place everywhere
      if (s > 0) gather(off - mmax, mmax, step_ - 1);
      for (int p = 0; p < size_; ++p) srcs[size_t(p)] = (p == rank_ ? chunk : slot(p)) + size_t(b) * es;
      reduce_elems(buf.dtype(), op, srcs.data(), size_, chunk + size_t(b) * es, slot(rank_) + size_t(b) * es, e - b);
    }
    sync(wf);
    gather((steps - 1) * mmax, total - (steps - 1) * mmax, step_ - 1);
  }

  void all_gather(Tensor in, Tensor& out, const ShmWaitFor& wf) {
    const size_t es = dtype_size(in.dtype());
    const int64_t n = in.numel(), cmax = chunk_elems(es, 1);
    char* dst = static_cast<char*>(out.raw_data());
    char* own = dst + size_t(rank_ * n) * es;
    if (overlaps(in, out) && in.raw_data() != own) in = in.clone(MemTag::comm);  // would be overwritten
    const char* src = static_cast<const char*>(in.raw_data());
    if (direct(out)) return direct_all_gather(seg_, src, dst, size_t(n) * es, wf);
    for (int64_t s = 0, steps = num_steps(n, cmax); s < steps; ++s, ++step_) {
      const int64_t off = s * cmax, c = std::min(cmax, n - off);
      std::memcpy(slot(rank_), src + size_t(off) * es, size_t(c) * es);
      if (src != own) std::memcpy(own + size_t(off) * es, src + size_t(off) * es, size_t(c) * es);
      sync(wf);
      for (int q = 0; q < size_; ++q)
        if (q != rank_) std::memcpy(dst + size_t(q * n + off) * es, slot(q), size_t(c) * es);
    }
  }

  void broadcast(Tensor& buf, int root, const ShmWaitFor& wf) {
    const size_t es = dtype_size(buf.dtype());
    const int64_t n = buf.numel(), cmax = chunk_elems(es, 1);
    char* data = static_cast<char*>(buf.raw_data());
    if (direct(buf)) return direct_broadcast(seg_, data, buf.nbytes(), root, wf);
    for (int64_t s = 0, steps = num_steps(n, cmax); s < steps; ++s, ++step_) {
      const int64_t off = s * cmax, c = std::min(cmax, n - off);
      if (rank_ == root) std::memcpy(slot(rank_), data + size_t(off) * es, size_t(c) * es);
      sync(wf);
      if (rank_ != root) std::memcpy(data + size_t(off) * es, slot(root), size_t(c) * es);
    }
  }

  std::shared_ptr<ShmState> st_;
  ShmSegment& seg_;
  const int rank_, size_;
  uint64_t step_ = 0;  // data steps done: picks the slot buffer (comm thread only)
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<ShmWork>> queue_;
  bool closing_ = false, running_ = false;
  std::thread thread_;  // last: starts once everything above exists
};

size_t default_slot_bytes() {
  if (const char* kib = std::getenv("ZT_SHM_SLOT_KIB")) {
    const long v = std::atol(kib);
    ZT_CHECK_AS(ErrorKind::comm, v > 0, "[comm] ZT_SHM_SLOT_KIB must be a positive number of KiB, got '", kib, "'");
    return size_t(v) << 10;
  }
  return kDefaultSlotBytes;
}

// ZT_SHM_SINGLE_COPY=0 keeps every collective on the staged path (Note [shm single copy]).
bool single_copy_wanted() {
  const char* v = std::getenv("ZT_SHM_SINGLE_COPY");
  return !v || std::strcmp(v, "0") != 0;
}

class ShmGroup : public Group {
 public:
  // Takes ownership of c. Collective over c.
  ShmGroup(MPI_Comm c, size_t slot_bytes) : comm_(c) {
    check_mpi(MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    MPI_Comm node = MPI_COMM_NULL;
    check_mpi(MPI_Comm_split_type(c, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node), "MPI_Comm_split_type");
    int node_size = 0, size = 0;
    MPI_Comm_size(node, &node_size);
    MPI_Comm_size(c, &size);
    MPI_Comm_free(&node);
    ZT_CHECK_AS(ErrorKind::comm, node_size == size, "[comm] backend 'shm' needs every rank on one node: ", node_size,
                " of the ", size, " ranks share this one (use 'mpi' or 'auto' across nodes)");
    st_ = std::make_shared<ShmState>();
    st_->seg = ShmSegment::create(c, slot_bytes ? slot_bytes : default_slot_bytes(), single_copy_wanted());
    engine_ = std::make_unique<ShmEngine>(st_);
  }

  ~ShmGroup() override {
    engine_.reset();                       // joins the thread; in-flight collectives are dropped, never awaited
    st_->seg->line(rank()).left.store(1);  // now, not when the last Work lets go of the segment
    if (comm_ != MPI_COMM_NULL && !mpi_finalized()) MPI_Comm_free(&comm_);
  }

  bool single_copy() const { return st_->seg->single_copy(); }
  int rank() const override { return st_->seg->rank(); }
  int size() const override { return st_->seg->size(); }
  const char* backend() const override { return "shm"; }
  int local_size() const override { return size(); }

  // Blocking and collective over this group's ranks, like MpiGroup::split.
  std::shared_ptr<Group> split(int color, int key) override {
    ZT_CHECK(color >= 0, "[comm] split: color ", color, " must be >= 0");
    MPI_Comm c = MPI_COMM_NULL;
    check_mpi(MPI_Comm_split(comm_, color, key, &c), "MPI_Comm_split");
    auto g = std::make_shared<ShmGroup>(c, st_->seg->slot_bytes());
    g->set_timeout(timeout());
    g->set_check_collectives(check_collectives());
    return g;
  }

  void abort_job(int code) override { MPI_Abort(MPI_COMM_WORLD, code); }

 protected:
  WorkPtr do_all_reduce(Tensor& buf, const Call& c) override { return launch(c, {buf}, 0); }
  WorkPtr do_reduce_scatter(const Tensor& in, Tensor& out, const Call& c) override { return launch(c, {in, out}, 0); }
  WorkPtr do_all_gather(const Tensor& in, Tensor& out, const Call& c) override { return launch(c, {in, out}, 0); }
  WorkPtr do_broadcast(Tensor& buf, int root, const Call& c) override { return launch(c, {buf}, root); }
  WorkPtr do_barrier(const Call& c) override { return launch(c, {}, 0); }

 private:
  WorkPtr launch(const Call& c, std::vector<Tensor> t, int root) {
    const std::string broken = st_->broken_message();
    ZT_CHECK_AS(ErrorKind::comm, broken.empty(), "[comm] ", call_name(c.coll, c.seq, c.label),
                " refused: the shm group broke earlier: ", broken);
    auto w = std::make_shared<ShmWork>(c.coll, c.op, c.seq, c.timeout_s, c.label,
                                       check_collectives() ? &c.sig : nullptr, std::move(t), root, st_);
    engine_->push(w);
    return w;
  }

  MPI_Comm comm_;
  std::shared_ptr<ShmState> st_;
  std::unique_ptr<ShmEngine> engine_;
};

MPI_Comm dup_world() {
  mpi_init();
  MPI_Comm c = MPI_COMM_NULL;
  check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &c), "MPI_Comm_dup");
  return c;
}

}  // namespace

GroupPtr make_shm_group_on(MPI_Comm c, size_t slot_bytes) {
  try {
    return std::make_shared<ShmGroup>(c, slot_bytes);
  } catch (...) {
    if (!mpi_finalized()) MPI_Comm_free(&c);
    throw;
  }
}

bool shm_single_copy(const Group& g) {
  const auto* s = dynamic_cast<const ShmGroup*>(&g);
  return s && s->single_copy();
}

GroupPtr make_shm_group(size_t slot_bytes) { return make_node_group_on(dup_world(), true, slot_bytes); }

GroupPtr make_launched_group() { return make_node_group_on(dup_world(), false, 0); }

}  // namespace detail
}  // namespace zt::comm
