// The "mpi" backend (OpenMPI). Each Group owns a duplicated communicator; collectives use the
// non-blocking MPI calls so Work::wait() can poll with a timeout instead of hanging forever.
// bf16 and f16 travel as 2-byte elements reduced by user-defined ops (Note [16-bit reductions]).
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "comm_detail.h"
#include "mpi_runtime.h"
#include "shm_reduce.h"

namespace zt::comm::detail {

// `where` names the collective ("all_reduce #3 (step 2)") when there is one.
void check_mpi(int rc, const char* call, const std::string& where) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  ZT_THROW_AS(ErrorKind::comm, "[comm] ", where, where.empty() ? "" : ": ", call,
              " failed: ", std::string(msg, size_t(len)));
}

bool mpi_finalized() {
  int fin = 0;
  MPI_Finalized(&fin);
  return fin != 0;
}

namespace {

using Clock = std::chrono::steady_clock;
bool g_runtime_gone = false;  // set when the Runtime static is destroyed at exit

// Note [16-bit reductions]: MPI has no bf16/f16 arithmetic, so each 2-byte type gets a
// user-defined op that widens both operands to fp32, adds (or compares) and rounds back to
// nearest even. Every pairwise step rounds once, so with more than two ranks the result may
// differ from a single rounding of the exact sum by the order MPI chose; max never rounds.
// avg is this sum followed by an fp32 division by the group size and one more rounding.
template <typename T, float (*widen)(T), T (*narrow)(float)>
void sum16(void* in, void* inout, int* len, MPI_Datatype*) {
  const T* a = static_cast<const T*>(in);
  T* b = static_cast<T*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = narrow(widen(a[i]) + widen(b[i]));
}

template <typename T, float (*widen)(T)>
void max16(void* in, void* inout, int* len, MPI_Datatype*) {
  const T* a = static_cast<const T*>(in);
  T* b = static_cast<T*>(inout);
  for (int i = 0; i < *len; ++i) {
    const float x = widen(a[i]), y = widen(b[i]);
    if (x != x || x > y) b[i] = a[i];  // NaN wins, as in torch.max
  }
}

// A communicator shared by its Group and the Work still in flight on it.
struct Comm {
  MPI_Comm c = MPI_COMM_NULL;
  explicit Comm(MPI_Comm comm) : c(comm) {}
  ~Comm() {
    if (c != MPI_COMM_NULL && !mpi_finalized()) MPI_Comm_free(&c);  // pending ops still finish
  }
};

// A collective's requests in flight: one round, or rounds posted one after another (Note [ring
// reduce-scatter]), `next` posting the next round's requests and returning none when done. A
// Work dropped before completion (e.g. after a timeout) leaves its Rounds to the runtime, which
// keeps polling them: MPI forbids freeing a collective's request, and a late peer still needs
// this rank's part of every round.
struct Launch;
struct Rounds;
// Note [collective signatures]: a group's collectives launched with a check and not yet posted,
// in launch order.
using LaunchQueue = std::deque<std::shared_ptr<Rounds>>;

struct Rounds {
  std::vector<MPI_Request> reqs;  // MPI_Testall sets completed ones to MPI_REQUEST_NULL
  std::function<std::vector<MPI_Request>()> next;
  std::vector<Tensor> keep;  // buffers must outlive the requests
  std::shared_ptr<Comm> comm;
  std::shared_ptr<Launch> launch;       // the check before posting; null when off (or point-to-point)
  std::shared_ptr<LaunchQueue> queue;   // the group's, while this waits in it

  // True when done. A checked collective first moves its group's queue along (progress()),
  // which posts it in its turn.
  bool poll(const std::string& where);
};

using Post = std::function<std::vector<MPI_Request>()>;

// Note [collective signatures] on mpi: a collective first all-gathers every rank's signature on a
// second communicator (where they pair in launch order whatever the data does) and posts its own
// requests only once they all match, and only after every collective launched before it has
// posted, so the data communicator sees the collectives in launch order on every rank. Any wait
// or test on the group moves the queue along, so waiting on a later collective first is fine.
struct Launch {
  CallSignature mine;
  std::vector<CallSignature> all;  // the Iallgather's output
  MPI_Request request = MPI_REQUEST_NULL;
  Post post, rest;                      // the collective's first round; its later ones (ring), if any
  std::shared_ptr<std::string> broken;  // the group's first mismatch: later launches fail with it
  std::shared_ptr<Comm> sig_comm;       // alive while the signatures are in flight
  std::string where;
  std::string mismatch;  // this collective's own, reported by its own wait
  bool posted = false;
};

// Posts, in launch order, each queued collective whose signatures have all arrived and match. A
// mismatch breaks the group and is that collective's to report: a wait on an earlier one, already
// posted, must not be cut short by it (its peers still need its later rounds).
void progress(LaunchQueue& q) {
  while (!q.empty()) {
    const std::shared_ptr<Rounds> r = q.front();
    Launch& l = *r->launch;
    if (!l.broken->empty()) return;
    int flag = 0;
    check_mpi(MPI_Test(&l.request, &flag, MPI_STATUS_IGNORE), "MPI_Test", l.where + ", its signature");
    if (!flag) return;
    q.pop_front();
    r->queue.reset();
    if (std::string why = signature_mismatch(l.all.data(), int(l.all.size())); !why.empty()) {
      *l.broken = l.mismatch = why;
      return;
    }
    r->reqs = l.post();
    r->next = std::move(l.rest);
    l.posted = true;
  }
}

bool Rounds::poll(const std::string& where) {
  if (launch && !launch->posted) {
    if (queue) progress(*queue);  // may post this one, and may find a later one out of step
  }
  if (launch && !launch->posted) {
    if (!launch->mismatch.empty()) ZT_THROW_AS(ErrorKind::comm, launch->mismatch);
    if (!launch->broken->empty())  // its peers may never post their signatures: fail now, not at the timeout
      ZT_THROW_AS(ErrorKind::comm, "[comm] ", where, " not run: the group broke: ", *launch->broken);
    return false;
  }
  while (!reqs.empty()) {
    int flag = 0;
    check_mpi(MPI_Testall(int(reqs.size()), reqs.data(), &flag, MPI_STATUSES_IGNORE), "MPI_Testall", where);
    if (!flag) return false;
    reqs = next ? next() : std::vector<MPI_Request>{};
  }
  return true;
}

// Note [finalize only in the normal path]: MPI_Finalize synchronises with every peer, so after
// a peer stalled or died it would hang. At exit we finalize only when no abandoned collective
// is left (after a short drain); otherwise we skip it and mpirun reports the unclean exit.
class Runtime {
 public:
  static Runtime& get() {
    static Runtime rt;
    return rt;
  }

  void abandon(std::shared_ptr<Rounds> p) {
    std::lock_guard<std::mutex> lock(mu_);
    graveyard_.push_back(std::move(p));
  }

  // Drops abandoned requests that have completed since; returns how many remain.
  size_t reap() {
    std::lock_guard<std::mutex> lock(mu_);
    std::erase_if(graveyard_, [](const std::shared_ptr<Rounds>& p) {
      try {
        return p->poll("");
      } catch (const Error&) {
        return true;  // failed: nothing more will come of it
      }
    });
    return graveyard_.size();
  }

  // The user-defined op for a 16-bit dtype; sum serves avg too (divided when done).
  MPI_Op op16(DType d, ReduceOp op) const {
    const bool max = op == ReduceOp::max;
    return d == DType::bf16 ? (max ? bf16_max_ : bf16_sum_) : (max ? f16_max_ : f16_sum_);
  }

  // Every rank meets here before MPI_Finalize (which waits for all anyway). After a shm failure
  // (skip_finalize) a peer may be stalled for good: then wait only a few seconds for it.
  bool all_ranks_at_exit() {
    MPI_Request r;
    if (MPI_Ibarrier(MPI_COMM_WORLD, &r) != MPI_SUCCESS) return false;
    const auto deadline = Clock::now() + std::chrono::seconds(5);
    for (int flag = 0;;) {
      if (MPI_Test(&r, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS) return false;
      if (flag) return true;
      if (!skip_why_.empty() && Clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }

  void skip_finalize(const char* why) {
    std::lock_guard<std::mutex> lock(mu_);
    if (skip_why_.empty()) skip_why_ = why;
  }

  ~Runtime() {
    g_runtime_gone = true;
    if (!owns_ || mpi_finalized()) return;
    auto deadline = Clock::now() + std::chrono::seconds(2);
    while (reap() > 0 && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (!graveyard_.empty()) {
      std::fprintf(stderr, "[comm] not calling MPI_Finalize: %zu collective(s) never completed\n", graveyard_.size());
      new std::vector<std::shared_ptr<Rounds>>(std::move(graveyard_));  // leaked on purpose: no MPI calls now
      return;
    }
    if (!all_ranks_at_exit()) {
      std::fprintf(stderr, "[comm] not calling MPI_Finalize: %s\n", skip_why_.c_str());
      return;
    }
    for (MPI_Op* op : {&bf16_sum_, &bf16_max_, &f16_sum_, &f16_max_}) MPI_Op_free(op);
    MPI_Finalize();
  }

 private:
  Runtime() {
    int init = 0, provided = 0;
    MPI_Initialized(&init);
    if (init) {
      MPI_Query_thread(&provided);  // someone else initialised MPI: they finalize it
    } else {
      check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
      owns_ = true;
    }
    ZT_CHECK_AS(ErrorKind::comm, provided >= MPI_THREAD_FUNNELED, "[comm] MPI provides thread level ", provided,
                ", need at least MPI_THREAD_FUNNELED (", MPI_THREAD_FUNNELED, ")");
    // Commutative: a + b and max(a, b) round the same either way round.
    check_mpi(MPI_Op_create(&sum16<bf16, bf16_to_float, float_to_bf16>, 1, &bf16_sum_), "MPI_Op_create");
    check_mpi(MPI_Op_create(&max16<bf16, bf16_to_float>, 1, &bf16_max_), "MPI_Op_create");
    check_mpi(MPI_Op_create(&sum16<f16, f16_to_float, float_to_f16>, 1, &f16_sum_), "MPI_Op_create");
    check_mpi(MPI_Op_create(&max16<f16, f16_to_float>, 1, &f16_max_), "MPI_Op_create");
  }

  bool owns_ = false;
  MPI_Op bf16_sum_ = MPI_OP_NULL, bf16_max_ = MPI_OP_NULL, f16_sum_ = MPI_OP_NULL, f16_max_ = MPI_OP_NULL;
  std::mutex mu_;
  std::vector<std::shared_ptr<Rounds>> graveyard_;
  std::string skip_why_;  // set by mpi_skip_finalize: finalize only if every rank reaches the exit
};

// Waits poll with Backoff (Note [wait backoff] in mpi_runtime.h).
class MpiWork : public Work {
 public:
  MpiWork(std::shared_ptr<Rounds> rounds, Coll coll, uint64_t seq, int rank, int size, double timeout,
          std::string label, std::function<void()> on_done)
      : Work(seq),
        rounds_(std::move(rounds)),
        coll_(coll),
        rank_(rank),
        size_(size),
        timeout_(timeout),
        label_(std::move(label)),
        on_done_(std::move(on_done)) {}

  ~MpiWork() override {
    if (!done_ && !g_runtime_gone && !mpi_finalized()) Runtime::get().abandon(std::move(rounds_));
  }

  bool test() override {
    if (done_) return true;
    if (!rounds_->poll(call_name(coll_, seq(), label_))) return false;
    done_ = true;
    if (on_done_) on_done_();  // copy out of a staging buffer, divide for avg
    rounds_->keep.clear();
    return true;
  }

  void wait() override {
    auto start = Clock::now();
    auto blocked = [&] { blocked_s_ += std::chrono::duration<double>(Clock::now() - start).count(); };
    if (test()) return blocked();
    Backoff backoff;
    while (!test()) {
      Runtime::get().reap();  // abandoned collectives still owe late peers their later rounds
      if (std::chrono::duration<double>(Clock::now() - start).count() > timeout_) {
        blocked();
        // MPI does not say which ranks have joined a collective, and a stalled one cannot be asked.
        ZT_THROW_AS(ErrorKind::comm, timeout_message(coll_, seq(), timeout_, rank_, size_, label_,
                                                     "a peer stalled or died (the mpi backend cannot tell which)"));
      }
      backoff.pause();
    }
    blocked();
  }

  // busy stays 0 (unknown): OpenMPI moves a non-blocking collective's data only inside MPI calls,
  // so no span of time can be said to have carried it while the caller computed.
  double blocked_seconds() const override { return blocked_s_; }

 private:
  std::shared_ptr<Rounds> rounds_;
  Coll coll_;
  int rank_, size_;
  double timeout_;
  std::string label_;
  std::function<void()> on_done_;
  bool done_ = false;
  double blocked_s_ = 0;
};

MPI_Datatype mpi_dtype(DType d) {
  switch (d) {
    case DType::f32:
      return MPI_FLOAT;
    case DType::bf16:
    case DType::f16:
      return MPI_UINT16_T;  // opaque 2-byte elements; see mpi_op
    case DType::i32:
      return MPI_INT32_T;
    case DType::i64:
      return MPI_INT64_T;
  }
  ZT_THROW("[comm] dtype ", dtype_name(d), " has no MPI type");
}

MPI_Op mpi_op(ReduceOp op, DType d) {
  if (d == DType::bf16 || d == DType::f16) return Runtime::get().op16(d, op);
  return op == ReduceOp::max ? MPI_MAX : MPI_SUM;  // avg: a sum, divided when done
}

int mpi_count(Coll c, int64_t n) {
  ZT_CHECK(n <= INT_MAX, "[comm] ", coll_name(c), ": ", n, " elements exceed MPI's int count limit (", INT_MAX,
           "); split the buffer");
  return int(n);
}

Tensor staging_like(const Tensor& t) { return Tensor::empty(t.shape(), t.dtype(), MemTag::comm); }

thread_local Tensor t_ring_staging;  // set only around one reduce_scatter (Note [ring staging])

class MpiGroup : public Group {
 public:
  explicit MpiGroup(MPI_Comm c) : comm_(std::make_shared<Comm>(c)) {
    check_mpi(MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
    check_mpi(MPI_Comm_rank(c, &rank_), "MPI_Comm_rank");
    check_mpi(MPI_Comm_size(c, &size_), "MPI_Comm_size");
    local_size_ = ranks_per_node(c);
    void* ub = nullptr;
    int flag = 0;
    check_mpi(MPI_Comm_get_attr(c, MPI_TAG_UB, &ub, &flag), "MPI_Comm_get_attr");
    if (flag) p2p_tag_ = *static_cast<int*>(ub);
    MPI_Comm sig = MPI_COMM_NULL;
    check_mpi(MPI_Comm_dup(c, &sig), "MPI_Comm_dup");
    sig_comm_ = std::make_shared<Comm>(sig);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* backend() const override { return "mpi"; }
  int local_size() const override { return local_size_; }
  uint64_t cross_node_bytes() const override { return local_size_ == size_ ? 0 : stats().total_bytes(); }

  // Blocking (MPI has no non-blocking split): every rank of this group must call it.
  std::shared_ptr<Group> split(int color, int key) override {
    ZT_CHECK(color >= 0, "[comm] split: color ", color, " must be >= 0");  // MPI_UNDEFINED is negative
    MPI_Comm c = MPI_COMM_NULL;
    check_mpi(MPI_Comm_split(comm_->c, color, key, &c), "MPI_Comm_split");
    auto g = std::make_shared<MpiGroup>(c);
    g->set_timeout(timeout());
    g->set_check_collectives(check_collectives());
    return g;
  }

  void abort_job(int code) override { MPI_Abort(MPI_COMM_WORLD, code); }

 protected:
  WorkPtr do_all_reduce(Tensor& buf, const Call& c) override {
    const int n = mpi_count(c.coll, buf.numel());
    std::function<void()> on_done;
    if (c.op == ReduceOp::avg) on_done = [buf, size = size_]() mutable { divide_(buf, size); };
    Post post = [buf, n, op = mpi_op(c.op, buf.dtype()), comm = comm_->c, where = call_name(c.coll, c.seq, c.label)] {
      MPI_Request r;
      check_mpi(MPI_Iallreduce(MPI_IN_PLACE, buf.raw_data(), n, mpi_dtype(buf.dtype()), op, comm, &r), "MPI_Iallreduce",
                where);
      return std::vector<MPI_Request>{r};
    };
    return issue(c, std::move(post), nullptr, {buf}, std::move(on_done));
  }

  // Note [ring reduce-scatter]: OpenMPI's non-blocking reduce_scatter (libnbc) reduces to one
  // rank and scatters from it, so that rank's link carries the whole buffer in and out: across
  // two hosts one host sent twice what the other did. A ring sends (P-1)/P of the buffer
  // through every link: in round k (of P-1) rank r sends the partial sum of chunk r-k-1 to rank
  // r+1 and adds its own part to chunk r-k-2 received from rank r-1; the last round lands chunk
  // r in `out` (which may alias `in`'s chunk r: it is read only then). Two chunk buffers.
  WorkPtr do_reduce_scatter(const Tensor& in, Tensor& out, const Call& c) override {
    const int n = mpi_count(c.coll, out.numel());
    if (size_ == 1) {  // no ring: the sum of one
      if (!in.same(out)) copy_bytes(in, out);
      return done_work(c.seq);
    }
    struct Ring {
      Tensor in, out, sent, got;  // sent: the partial sum in flight; got: the one received
      int k = 0;
    };
    auto ring = std::make_shared<Ring>();
    ring->in = in;
    ring->out = out;
    if (Tensor s = std::exchange(t_ring_staging, Tensor()); s.defined()) {
      ZT_CHECK(s.numel() == 2 * out.numel() && s.dtype() == out.dtype(), "[comm] ring staging of ", s.numel(), " ",
               dtype_name(s.dtype()), " for a chunk of ", out.numel(), " ", dtype_name(out.dtype()));
      ring->sent = s.slice(0, 0, out.numel());
      ring->got = s.slice(0, out.numel(), 2 * out.numel());
    } else {
      ring->sent = staging_like(out);
      ring->got = staging_like(out);
    }
    const DType d = in.dtype();
    const ReduceOp op = c.op == ReduceOp::avg ? ReduceOp::sum : c.op;
    const size_t chunk_bytes = out.nbytes();
    auto chunk = [ring, chunk_bytes](int i) {
      return static_cast<const char*>(ring->in.raw_data()) + size_t(i) * chunk_bytes;
    };
    const int p = size_, r = rank_, tag = int(c.seq % 32768);
    const MPI_Comm comm = comm_->c;
    const std::string where = call_name(c.coll, c.seq, c.label);
    auto post = [=]() {  // round ring->k: send to r+1, receive from r-1
      std::vector<MPI_Request> q(2);
      const void* send = ring->k == 0 ? chunk((r - 1 + p) % p) : ring->sent.raw_data();
      check_mpi(MPI_Irecv(ring->got.raw_data(), n, mpi_dtype(d), (r - 1 + p) % p, tag, comm, &q[0]), "MPI_Irecv",
                where);
      check_mpi(MPI_Isend(send, n, mpi_dtype(d), (r + 1) % p, tag, comm, &q[1]), "MPI_Isend", where);
      return q;
    };
    std::function<std::vector<MPI_Request>()> next = [=]() {
      const int recv_chunk = ((r - ring->k - 2) % p + 2 * p) % p;
      const bool last = ring->k == p - 2;
      const void* src[2] = {ring->got.raw_data(), chunk(recv_chunk)};
      reduce_elems(d, op, src, 2, last ? ring->out.raw_data() : ring->sent.raw_data(), nullptr, n);
      ++ring->k;
      return last ? std::vector<MPI_Request>{} : post();
    };
    std::function<void()> on_done;
    if (c.op == ReduceOp::avg) on_done = [out, size = size_]() mutable { divide_(out, size); };
    return issue(c, post, std::move(next), {in, out, ring->sent, ring->got}, std::move(on_done));
  }

  WorkPtr do_all_gather(const Tensor& in, Tensor& out, const Call& c) override {
    int n = mpi_count(c.coll, in.numel());
    const void* send = in.raw_data();
    Tensor src = in;
    if (overlaps(in, out)) {
      // In place when `in` is this rank's own slot of `out` (ZeRO's shard views); else stage it.
      auto own = static_cast<const char*>(out.raw_data()) + size_t(rank_) * in.nbytes();
      if (send == own) {
        send = MPI_IN_PLACE;
      } else {
        src = in.clone(MemTag::comm);
        send = src.raw_data();
      }
    }
    Post post = [send, n, dt = mpi_dtype(in.dtype()), dst = out.raw_data(), comm = comm_->c,
                 where = call_name(c.coll, c.seq, c.label)] {
      MPI_Request r;
      check_mpi(MPI_Iallgather(send, n, dt, dst, n, dt, comm, &r), "MPI_Iallgather", where);
      return std::vector<MPI_Request>{r};
    };
    return issue(c, std::move(post), nullptr, {in, out, src}, nullptr);
  }

  WorkPtr do_broadcast(Tensor& buf, int root, const Call& c) override {
    Post post = [buf, n = mpi_count(c.coll, buf.numel()), root, comm = comm_->c,
                 where = call_name(c.coll, c.seq, c.label)] {
      MPI_Request r;
      check_mpi(MPI_Ibcast(buf.raw_data(), n, mpi_dtype(buf.dtype()), root, comm, &r), "MPI_Ibcast", where);
      return std::vector<MPI_Request>{r};
    };
    return issue(c, std::move(post), nullptr, {buf}, nullptr);
  }

  WorkPtr do_all_to_all(const Tensor& in, Tensor& out, const Call& c) override {
    Post post = [k = mpi_count(c.coll, in.numel() / size_), dt = mpi_dtype(in.dtype()), src = in.raw_data(),
                 dst = out.raw_data(), comm = comm_->c, where = call_name(c.coll, c.seq, c.label)] {
      MPI_Request r;
      check_mpi(MPI_Ialltoall(src, k, dt, dst, k, dt, comm, &r), "MPI_Ialltoall", where);
      return std::vector<MPI_Request>{r};
    };
    return issue(c, std::move(post), nullptr, {in, out}, nullptr);
  }

  // Note [point-to-point]: MPI_Isend / MPI_Irecv on the group's communicator, with the largest
  // tag (the ring reduce-scatter's tags stay below 32768), so messages between one pair are
  // matched in order. A parameter server's traffic is then exactly its W pushes in and W pulls
  // out of Ψ/S elements each (Note [parameter-server traffic] in zt/zero/param_server.h).
  WorkPtr do_send(const Tensor& buf, int peer, const Call& c) override {
    MPI_Request r;
    check_mpi(
        MPI_Isend(buf.raw_data(), mpi_count(c.coll, buf.numel()), mpi_dtype(buf.dtype()), peer, p2p_tag_, comm_->c, &r),
        "MPI_Isend", call_name(c.coll, c.seq, c.label));
    return issued(r, c, {buf}, nullptr);
  }

  WorkPtr do_recv(Tensor& buf, int peer, const Call& c) override {
    MPI_Request r;
    check_mpi(
        MPI_Irecv(buf.raw_data(), mpi_count(c.coll, buf.numel()), mpi_dtype(buf.dtype()), peer, p2p_tag_, comm_->c, &r),
        "MPI_Irecv", call_name(c.coll, c.seq, c.label));
    return issued(r, c, {buf}, nullptr);
  }

  WorkPtr do_barrier(const Call& c) override {
    Post post = [comm = comm_->c, where = call_name(c.coll, c.seq, c.label)] {
      MPI_Request r;
      check_mpi(MPI_Ibarrier(comm, &r), "MPI_Ibarrier", where);
      return std::vector<MPI_Request>{r};
    };
    return issue(c, std::move(post), nullptr, {}, nullptr);
  }

 private:
  // Point-to-point: posted at once (their order between a pair is theirs; no signatures).
  WorkPtr issued(MPI_Request r, const Call& c, std::vector<Tensor> keep, std::function<void()> on_done) {
    Runtime::get().reap();
    auto rounds = std::make_shared<Rounds>(Rounds{{r}, nullptr, std::move(keep), comm_, nullptr, nullptr});
    return std::make_shared<MpiWork>(std::move(rounds), c.coll, c.seq, rank_, size_, c.timeout_s, c.label,
                                     std::move(on_done));
  }

  // A collective: posted at once, or after its signature check (Note [collective signatures]).
  WorkPtr issue(const Call& c, Post post, Post rest, std::vector<Tensor> keep, std::function<void()> on_done) {
    const std::string where = call_name(c.coll, c.seq, c.label);
    ZT_CHECK_AS(ErrorKind::comm, broken_->empty(), "[comm] ", where, " refused: the group broke earlier: ", *broken_);
    Runtime::get().reap();
    auto rounds = std::make_shared<Rounds>(Rounds{{}, std::move(rest), std::move(keep), comm_, nullptr, nullptr});
    if (!check_collectives()) {
      rounds->reqs = post();
    } else {
      auto l = std::make_shared<Launch>();
      l->mine = c.sig;
      l->all.resize(size_t(size_));
      l->post = std::move(post);
      l->rest = std::move(rounds->next);
      l->broken = broken_;
      l->sig_comm = sig_comm_;
      l->where = where;
      check_mpi(MPI_Iallgather(&l->mine, int(sizeof(CallSignature)), MPI_BYTE, l->all.data(),
                               int(sizeof(CallSignature)), MPI_BYTE, sig_comm_->c, &l->request),
                "MPI_Iallgather", where + ", its signature");
      rounds->launch = std::move(l);
      rounds->queue = queue_;
      queue_->push_back(rounds);
    }
    return std::make_shared<MpiWork>(std::move(rounds), c.coll, c.seq, rank_, size_, c.timeout_s, c.label,
                                     std::move(on_done));
  }

  std::shared_ptr<Comm> comm_;
  std::shared_ptr<Comm> sig_comm_;  // Note [collective signatures]: the signatures' own communicator
  std::shared_ptr<LaunchQueue> queue_ = std::make_shared<LaunchQueue>();
  std::shared_ptr<std::string> broken_ = std::make_shared<std::string>();
  int rank_ = 0, size_ = 1, local_size_ = 1;
  int p2p_tag_ = 32767;  // MPI_TAG_UB (Note [point-to-point])
};

}  // namespace

}  // namespace zt::comm::detail

namespace zt::comm {

bool mpi_available() { return true; }

namespace detail {

void mpi_init() { Runtime::get(); }

void mpi_skip_finalize(const char* why) { Runtime::get().skip_finalize(why); }

GroupPtr make_mpi_group_on(MPI_Comm c) { return std::make_shared<MpiGroup>(c); }

WorkPtr mpi_reduce_scatter_staged(Group& mpi, const Tensor& in, Tensor& out, const CollOptions& o, Tensor staging) {
  ZT_CHECK(dynamic_cast<MpiGroup*>(&mpi), "[comm] ring staging given to a ", mpi.backend(), " group");
  t_ring_staging = std::move(staging);
  struct Clear {
    ~Clear() { t_ring_staging = Tensor(); }  // unused (one rank, a refused call): never left for another
  } clear;
  return mpi.reduce_scatter_async(in, out, o);
}

GroupPtr make_mpi_group() {
  Runtime::get();  // MPI_Init_thread once; finalized when the process ends
  MPI_Comm c = MPI_COMM_NULL;
  check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &c), "MPI_Comm_dup");
  return std::make_shared<MpiGroup>(c);
}

}  // namespace detail
}  // namespace zt::comm
