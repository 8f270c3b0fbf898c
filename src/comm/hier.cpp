// Note [hierarchical groups]: across nodes, backend "shm" (and "auto") is shm inside each node
// and MPI between nodes, as NCCL's tree/ring over NVLink + network. With L ranks per node, M
// nodes and rank = m*L + l (each node's ranks consecutive, which mpirun's default --map-by slot
// gives), every rank moves only 1/L of the buffer over the network:
//   reduce_scatter: per node m', shm reduce_scatter of in's node slice m' (L chunks) into
//                   tmp[m'] (one chunk each); then MPI reduce_scatter of tmp among the ranks with
//                   the same l, which leaves chunk m*L + l.
//   all_gather:     MPI all_gather among the same-l ranks into tmp (M chunks); then per node m',
//                   shm all_gather of tmp[m'] into out's node slice m'.
//   all_reduce:     shm reduce_scatter, MPI all_reduce of the 1/L piece, shm all_gather (the
//                   last numel % L elements: shm all_reduce, MPI all_reduce).
//   broadcast:      MPI broadcast among the root's same-l ranks, then shm broadcast from it.
//   barrier:        shm, MPI, shm.  avg is avg at both levels (equal group sizes); 16-bit
//                   results round once per level.
// Each stage runs on one of three lanes: the first shm group (stages launched by the call), the
// MPI group and the second shm group (stages launched by the driver). Every lane sees launches
// in the collectives' launch order on every rank, whatever the timing, which is what matching
// collectives by order needs. MPI allows only the caller's thread (MPI_THREAD_FUNNELED), so the
// driver runs inside the group's calls and the Works' test() and wait().
#include <charconv>
#include <cstring>
#include <deque>
#include <functional>
#include <string>
#include <vector>

#include "mpi_runtime.h"

namespace zt::comm::detail {
namespace {

// kCheck: the whole group over MPI, for the signatures (Note [collective signatures]).
enum Lane { kIntraFirst, kInter, kIntraLast, kCheck, kNumLanes };

struct Stage {
  Lane lane;
  std::function<std::vector<WorkPtr>()> launch;  // empty when this rank has no part in it
};

// Ranks per node from ZT_COMM_NODE_RANKS (a test hook: each K consecutive ranks of the job count
// as one node, so the hierarchy runs on one machine); 0 = the real nodes.
int node_ranks_override() {
  const char* s = std::getenv("ZT_COMM_NODE_RANKS");
  if (!s) return 0;
  int k = 0;
  const char* end = s + std::strlen(s);
  const auto [at, ec] = std::from_chars(s, end, k);  // all of it, in range: "2abc" and 1e99 are not numbers
  ZT_CHECK_AS(ErrorKind::comm, ec == std::errc() && at == end && k > 0,
              "[comm] ZT_COMM_NODE_RANKS must be a positive number of ranks, got '", s, "'");
  return k;
}

class HierWork;

// The sub-groups and the collectives not yet finished, shared by the group and its Works.
struct HierState {
  GroupPtr lane[kNumLanes];
  int rank = 0, size = 0;
  std::deque<std::shared_ptr<HierWork>> pending;  // in launch order
  std::string broken;                             // the first failure; later calls fail with it

  void poll();  // advances every pending collective as far as it can without blocking
  void fail_all(const std::string& why);
};

class HierWork : public Work {
 public:
  HierWork(Coll coll, uint64_t seq, double timeout_s, std::string label, std::vector<Stage> stages,
           std::vector<Tensor> keep, std::shared_ptr<HierState> st)
      : Work(seq),
        coll_(coll),
        timeout_s_(timeout_s),
        label_(std::move(label)),
        stages_(std::move(stages)),
        keep_(std::move(keep)),
        st_(std::move(st)) {}

  void wait() override {
    const auto start = std::chrono::steady_clock::now();
    Backoff backoff;
    while (!test()) {
      if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > timeout_s_) {
        fail(timeout_message(coll_, seq(), timeout_s_, st_->rank, st_->size, label_));
        st_->fail_all(error_);
        ZT_THROW_AS(ErrorKind::comm, error_);
      }
      backoff.pause();
    }
  }

  bool test() override {
    if (!done_ && error_.empty()) st_->poll();
    if (!error_.empty()) ZT_THROW_AS(ErrorKind::comm, error_);
    return done_;
  }

  // The MPI lane cannot time its transfers (see MpiWork), so the overlap stays unknown.
  double busy_seconds() const override { return 0; }

  // Called by HierState::poll. `blocked` holds the lanes that earlier collectives have yet to
  // launch on: our stage on such a lane waits, so every lane keeps the launch order.
  void advance(std::vector<bool>& blocked) {
    if (done_ || !error_.empty()) return;
    try {
      for (;;) {
        for (const WorkPtr& w : running_)
          if (!w->test()) return block_rest(blocked);
        running_.clear();
        if (next_ == stages_.size()) {
          done_ = true;
          keep_.clear();
          return;
        }
        if (blocked[size_t(stages_[next_].lane)]) return block_rest(blocked);
        launch_next();
      }
    } catch (const Error& e) {
      // A sub-collective's timeout reads as ours; anything else keeps its own words.
      const std::string what = e.what();
      fail(what.find(" timed out after ") != std::string::npos
               ? timeout_message(coll_, seq(), timeout_s_, st_->rank, st_->size, label_)
               : "[comm] " + call_name(coll_, seq(), label_) + " failed on rank " + std::to_string(st_->rank) + " of " +
                     std::to_string(st_->size) + ": " + what);
      st_->fail_all(error_);
    }
  }

  void launch_next() {
    const Stage& s = stages_[next_++];
    if (s.launch) running_ = s.launch();
  }
  void fail(const std::string& why) {
    if (error_.empty() && !done_) error_ = why;
    keep_.clear();
    running_.clear();
  }
  bool finished() const { return done_ || !error_.empty(); }
  const std::string& name_error() const { return error_; }
  std::string call() const { return call_name(coll_, seq(), label_); }

 private:
  void block_rest(std::vector<bool>& blocked) const {
    for (size_t i = next_; i < stages_.size(); ++i) blocked[size_t(stages_[i].lane)] = true;
  }

  const Coll coll_;
  const double timeout_s_;
  const std::string label_;
  std::vector<Stage> stages_;
  size_t next_ = 0;  // the first stage not launched
  std::vector<WorkPtr> running_;
  std::vector<Tensor> keep_;  // the caller's buffers and ours, alive until the end
  std::shared_ptr<HierState> st_;
  bool done_ = false;
  std::string error_;
};

void HierState::poll() {
  std::vector<bool> blocked(kNumLanes, false);
  const auto works = pending;  // a failure clears `pending`
  for (const auto& w : works) w->advance(blocked);
  // Every finished one, not only a prefix: a Work's buffers are then freed when its caller lets
  // go of it, in the program's order, not at whichever poll first sees the ones before it done.
  std::erase_if(pending, [](const auto& w) { return w->finished(); });
}

void HierState::fail_all(const std::string& why) {
  if (broken.empty()) broken = why;
  mpi_skip_finalize("a collective between nodes failed, so a peer may be stalled");
  for (const auto& w : pending)
    if (!w->finished()) w->fail("[comm] " + w->call() + " not run: the group broke: " + broken);
  pending.clear();
}

class HierGroup : public Group {
 public:
  // Takes ownership of c and node (this rank's node, local rank l of L); collective over c.
  HierGroup(MPI_Comm c, MPI_Comm node, size_t slot_bytes) : comm_(c), st_(std::make_shared<HierState>()) {
    MPI_Comm_rank(c, &st_->rank);
    MPI_Comm_size(c, &st_->size);
    MPI_Comm_rank(node, &local_);
    MPI_Comm_size(node, &local_size_);
    MPI_Comm first = MPI_COMM_NULL, inter = MPI_COMM_NULL;
    check_mpi(MPI_Comm_dup(node, &first), "MPI_Comm_dup");
    check_mpi(MPI_Comm_split(c, local_, st_->rank, &inter), "MPI_Comm_split");
    st_->lane[kInter] = make_mpi_group_on(inter);
    st_->lane[kIntraFirst] = make_shm_group_on(first, slot_bytes);
    st_->lane[kIntraLast] = make_shm_group_on(node, slot_bytes);
    MPI_Comm check = MPI_COMM_NULL;
    check_mpi(MPI_Comm_dup(c, &check), "MPI_Comm_dup");
    st_->lane[kCheck] = make_mpi_group_on(check);
    for (const GroupPtr& g : st_->lane) g->set_check_collectives(false);  // launch() checks the whole group
    slot_bytes_ = slot_bytes;
  }
  ~HierGroup() override {
    if (comm_ != MPI_COMM_NULL && !mpi_finalized()) MPI_Comm_free(&comm_);
  }

  int rank() const override { return st_->rank; }
  int size() const override { return st_->size; }
  const char* backend() const override { return "shm+mpi"; }
  int local_size() const override { return local_size_; }
  uint64_t cross_node_bytes() const override { return lane(kInter).stats().total_bytes(); }

  std::shared_ptr<Group> split(int color, int key) override {
    ZT_CHECK(color >= 0, "[comm] split: color ", color, " must be >= 0");
    MPI_Comm c = MPI_COMM_NULL;
    check_mpi(MPI_Comm_split(comm_, color, key, &c), "MPI_Comm_split");
    GroupPtr g = make_node_group_on(c, false, slot_bytes_);
    g->set_timeout(timeout());
    g->set_check_collectives(check_collectives());
    return g;
  }

  void abort_job(int code) override { MPI_Abort(MPI_COMM_WORLD, code); }

 protected:
  WorkPtr do_reduce_scatter(const Tensor& in, Tensor& out, const Call& c) override {
    const int64_t n = out.numel(), nodes = nodes_count();
    Tensor tmp = Tensor::empty({nodes * n}, in.dtype(), MemTag::comm);
    // Made now, in the program's order, not when the stage between nodes starts (Note [ring staging]).
    Tensor ring = nodes > 1 ? Tensor::empty({2 * n}, in.dtype(), MemTag::comm) : Tensor();
    auto intra = [=, this] {
      std::vector<WorkPtr> w;
      for (int64_t m = 0; m < nodes; ++m) {
        Tensor dst = tmp.slice(0, m * n, (m + 1) * n);
        w.push_back(lane(kIntraFirst)
                        .reduce_scatter_async(flat(in, m * local_size_ * n, (m + 1) * local_size_ * n), dst,
                                              sub(c, "in node")));
      }
      return w;
    };
    auto inter = [=, this]() mutable -> std::vector<WorkPtr> {
      return {mpi_reduce_scatter_staged(lane(kInter), tmp, out, sub(c, "between nodes"), ring)};
    };
    return launch(c, {{kIntraFirst, intra}, {kInter, inter}}, {in, out, tmp});
  }

  WorkPtr do_all_gather(const Tensor& in, Tensor& out, const Call& c) override {
    const int64_t n = in.numel(), nodes = nodes_count();
    Tensor tmp = Tensor::empty({nodes * n}, in.dtype(), MemTag::comm);
    auto inter = [=, this]() mutable -> std::vector<WorkPtr> {
      return {lane(kInter).all_gather_async(in, tmp, sub(c, "between nodes"))};
    };
    auto intra = [=, this] {
      std::vector<WorkPtr> w;
      for (int64_t m = 0; m < nodes; ++m) {
        Tensor dst = flat(out, m * local_size_ * n, (m + 1) * local_size_ * n);
        w.push_back(lane(kIntraLast).all_gather_async(tmp.slice(0, m * n, (m + 1) * n), dst, sub(c, "in node")));
      }
      return w;
    };
    return launch(c, {{kInter, inter}, {kIntraLast, intra}}, {in, out, tmp});
  }

  WorkPtr do_all_reduce(Tensor& buf, const Call& c) override {
    const int64_t total = buf.numel(), q = total / local_size_, main = q * local_size_;
    Tensor piece = q > 0 ? Tensor::empty({q}, buf.dtype(), MemTag::comm) : Tensor();
    Tensor head = flat(buf, 0, main), tail = flat(buf, main, total);
    auto reduce = [=, this]() mutable {
      std::vector<WorkPtr> w;
      if (q > 0) w.push_back(lane(kIntraFirst).reduce_scatter_async(head, piece, sub(c, "in node")));
      if (main < total) w.push_back(lane(kIntraFirst).all_reduce_async(tail, sub(c, "in node")));
      return w;
    };
    auto across = [=, this]() mutable {
      std::vector<WorkPtr> w;
      if (q > 0) w.push_back(lane(kInter).all_reduce_async(piece, sub(c, "between nodes")));
      if (main < total) w.push_back(lane(kInter).all_reduce_async(tail, sub(c, "between nodes")));
      return w;
    };
    auto gather = [=, this]() mutable -> std::vector<WorkPtr> {
      if (q == 0) return {};
      return {lane(kIntraLast).all_gather_async(piece, head, sub(c, "in node"))};
    };
    return launch(c, {{kIntraFirst, reduce}, {kInter, across}, {kIntraLast, gather}}, {buf, piece});
  }

  WorkPtr do_broadcast(Tensor& buf, int root, const Call& c) override {
    const int root_node = root / local_size_, root_local = root % local_size_;
    std::function<std::vector<WorkPtr>()> across;  // only the root's same-l ranks take part
    if (local_ == root_local)
      across = [=, this]() mutable -> std::vector<WorkPtr> {
        return {lane(kInter).broadcast_async(buf, root_node, sub(c, "between nodes"))};
      };
    auto inside = [=, this]() mutable -> std::vector<WorkPtr> {
      return {lane(kIntraLast).broadcast_async(buf, root_local, sub(c, "in node"))};
    };
    return launch(c, {{kInter, across}, {kIntraLast, inside}}, {buf});
  }

  WorkPtr do_barrier(const Call& c) override {
    auto on = [=, this](Lane l, const char* where) {
      return [=, this]() -> std::vector<WorkPtr> { return {lane(l).barrier_async(sub(c, where))}; };
    };
    return launch(c,
                  {{kIntraFirst, on(kIntraFirst, "in node")},
                   {kInter, on(kInter, "between nodes")},
                   {kIntraLast, on(kIntraLast, "in node")}},
                  {});
  }

 private:
  Group& lane(Lane l) const { return *st_->lane[l]; }
  int64_t nodes_count() const { return st_->size / local_size_; }
  // Elements [b, e) of a contiguous tensor, as a 1-d view.
  static Tensor flat(const Tensor& t, int64_t b, int64_t e) { return t.view({t.numel()}).slice(0, b, e); }
  // A sub-collective's options: the call's op and timeout, its label naming our collective.
  CollOptions sub(const Call& c, const char* where) const {
    return CollOptions(c.op, call_name(c.coll, c.seq, c.label) + " " + where, c.timeout_s);
  }

  WorkPtr launch(const Call& c, std::vector<Stage> stages, std::vector<Tensor> keep) {
    ZT_CHECK_AS(ErrorKind::comm, st_->broken.empty(), "[comm] ", call_name(c.coll, c.seq, c.label),
                " refused: the group broke earlier: ", st_->broken);
    if (check_collectives()) {
      // Note [collective signatures]: every rank's, gathered over the whole group, then compared
      // before the first stage (a lane sees only its own ranks, so it could not name both sides).
      constexpr int64_t kWords = sizeof(CallSignature) / 4;
      Tensor mine = Tensor::empty({kWords}, DType::i32, MemTag::comm);
      Tensor all = Tensor::empty({kWords * st_->size}, DType::i32, MemTag::comm);
      std::memcpy(mine.raw_data(), &c.sig, sizeof(CallSignature));
      auto gather = [=, this]() mutable -> std::vector<WorkPtr> { return {lane(kCheck).all_gather_async(mine, all)}; };
      auto compare = [all, n = st_->size]() -> std::vector<WorkPtr> {
        std::vector<CallSignature> sigs(static_cast<size_t>(n));
        std::memcpy(sigs.data(), all.raw_data(), sigs.size() * sizeof(CallSignature));
        if (std::string why = signature_mismatch(sigs.data(), n); !why.empty()) ZT_THROW_AS(ErrorKind::comm, why);
        return {};
      };
      stages.insert(stages.begin(), {Stage{kCheck, gather}, Stage{kCheck, compare}});
      keep.insert(keep.end(), {mine, all});
    }
    auto w = std::make_shared<HierWork>(c.coll, c.seq, c.timeout_s, c.label, std::move(stages), std::move(keep), st_);
    st_->pending.push_back(w);
    st_->poll();  // launches what may start now: the first-lane stage at least, in call order
    return w;
  }

  MPI_Comm comm_;
  std::shared_ptr<HierState> st_;
  int local_ = 0, local_size_ = 1;
  size_t slot_bytes_ = 0;
};

// This rank's node (real, or by ZT_COMM_NODE_RANKS), ordered by rank; collective over c.
MPI_Comm split_node(MPI_Comm c, int rank) {
  MPI_Comm node = MPI_COMM_NULL;
  if (const int k = node_ranks_override()) {
    int world_rank = 0;  // nodes hold consecutive ranks of the job, whatever group c is
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    check_mpi(MPI_Comm_split(c, world_rank / k, rank, &node), "MPI_Comm_split");
  } else {
    check_mpi(MPI_Comm_split_type(c, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node), "MPI_Comm_split_type");
  }
  return node;
}

// This rank's node in c and whether the nodes allow the hierarchy (collective over c).
struct NodeLayout {
  MPI_Comm node = MPI_COMM_NULL;  // the caller frees it
  int local = 0, local_size = 1, smallest = 1, largest = 1;
  bool one_node = false;
  bool alike = false;  // the same number of ranks on every node, each node's ranks consecutive
};

NodeLayout node_layout(MPI_Comm c) {
  int rank = 0, size = 0;
  MPI_Comm_rank(c, &rank);
  MPI_Comm_size(c, &size);
  NodeLayout n;
  n.node = split_node(c, rank);
  MPI_Comm_rank(n.node, &n.local);
  MPI_Comm_size(n.node, &n.local_size);
  // The hierarchy needs rank = m*L + l with the same L on every node; every rank must agree.
  int mine[3] = {n.local_size, -n.local_size, rank == (rank / n.local_size) * n.local_size + n.local ? 1 : 0}, all[3];
  check_mpi(MPI_Allreduce(mine, all, 3, MPI_INT, MPI_MIN, c), "MPI_Allreduce");
  n.one_node = n.local_size == size;
  n.smallest = all[0];
  n.largest = -all[1];
  n.alike = all[0] == -all[1] && all[2] == 1;
  return n;
}

}  // namespace

int ranks_per_node(MPI_Comm c) {
  NodeLayout n = node_layout(c);
  MPI_Comm_free(&n.node);
  return n.alike ? n.local_size : 1;
}

GroupPtr make_node_group_on(MPI_Comm c, bool shm_required, size_t slot_bytes) {
  int size = 0;
  MPI_Comm_size(c, &size);
  NodeLayout layout = node_layout(c);
  MPI_Comm node = layout.node;
  const int local = layout.local, local_size = layout.local_size;
  const bool one_node = layout.one_node, alike = layout.alike;
  if (!one_node && !(alike && local_size > 1)) {
    MPI_Comm_free(&node);
    if (!shm_required) return make_mpi_group_on(c);
    if (!mpi_finalized()) MPI_Comm_free(&c);
    ZT_THROW_AS(ErrorKind::comm, "[comm] backend 'shm' across nodes needs the same number of ranks (more than one) ",
                "on every node, each node's ranks consecutive (mpirun --map-by slot); this node has ", local_size,
                " of ", size, " ranks, nodes have ", layout.smallest, " to ", layout.largest, " (use 'mpi' or 'auto')");
  }
  auto make = [&]() -> GroupPtr {
    if (!one_node) return std::make_shared<HierGroup>(c, node, slot_bytes);
    MPI_Comm_free(&node);
    return make_shm_group_on(c, slot_bytes);  // frees c when it throws
  };
  if (shm_required) return make();
  // auto: if any rank cannot map its segment, every rank uses mpi on a spare copy of c.
  MPI_Comm spare = MPI_COMM_NULL;
  check_mpi(MPI_Comm_dup(c, &spare), "MPI_Comm_dup");
  GroupPtr g;
  std::string why;
  try {
    g = make();
  } catch (const Error& e) {
    why = e.what();
  }
  int ok = g ? 1 : 0, all_ok = 0;
  check_mpi(MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, spare), "MPI_Allreduce");
  if (all_ok) {
    MPI_Comm_free(&spare);
    return g;
  }
  if (!why.empty() && local == 0) std::fprintf(stderr, "%s; backend 'auto' uses mpi instead\n", why.c_str());
  g.reset();
  return make_mpi_group_on(spare);
}

}  // namespace zt::comm::detail
