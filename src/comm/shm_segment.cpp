// Note [shm segment layout]: one POSIX shared-memory segment per shm group:
//   [header: magic, size, slot bytes][size x ShmRankLine][size x ShmWaitLine] (one page or more)
//   [rank 0 buffer 0][rank 0 buffer 1][rank 1 buffer 0] ...   (slot_bytes each, page aligned)
// It is unlinked as soon as every rank has mapped it, so nothing stays in /dev/shm, even
// after a crash; the memory goes when the last rank unmaps it.
#include "shm_segment.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <new>

#include "mpi_runtime.h"

namespace zt::comm::detail {
namespace {

constexpr uint64_t kMagic = 0x7a742d73686d3031ull;  // "zt-shm01"
constexpr size_t kPage = 4096;
constexpr int kSpin = 256;                              // ~10 us of pause before sleeping
constexpr auto kSlice = std::chrono::milliseconds(20);  // futex sleeps re-check peers this often

static_assert(std::atomic<uint32_t>::is_always_lock_free && std::atomic<uint64_t>::is_always_lock_free,
              "shm words must be lock-free to work across processes");

struct Header {
  uint64_t magic;
  int64_t size;
  uint64_t slot_bytes;
};

struct Announce {  // rank 0 -> peers
  char name[64];
  uint64_t slot_bytes;
  uint64_t bytes;
  int32_t err;  // errno of rank 0's creation, 0 when fine
  char what[32];
};

size_t round_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

size_t data_offset(int size) {
  return round_up(64 + size_t(size) * (sizeof(ShmRankLine) + sizeof(ShmWaitLine)), kPage);
}

bool reached(uint32_t v, uint32_t k) { return int32_t(v - k) >= 0; }

void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// Non-private futex ops: the word lives in memory shared between processes.
long futex(std::atomic<uint32_t>* word, int op, uint32_t val, const timespec* ts) {
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), op, val, ts, nullptr, 0);
}

std::string peer_error(const ShmWaitFor& w, int rank, int size, const std::string& why) {
  return zt::detail::concat("[comm] ", call_name(w.coll, w.seq, w.label), " failed on rank ", rank, " of ", size, ": ",
                            why);
}

}  // namespace

ShmSegment::ShmSegment(char* base, size_t bytes, int rank, int size, size_t slot_bytes)
    : base_(base), bytes_(bytes), rank_(rank), size_(size), slot_bytes_(slot_bytes), data_off_(data_offset(size)) {}

ShmSegment::~ShmSegment() {
  line(rank_).left.store(1, std::memory_order_seq_cst);
  munmap(base_, bytes_);
}

std::unique_ptr<ShmSegment> ShmSegment::create(MPI_Comm comm, size_t slot_bytes, bool single_copy) {
  static std::atomic<int> counter{0};
  int rank = 0, size = 1;
  check_mpi(MPI_Comm_rank(comm, &rank), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(comm, &size), "MPI_Comm_size");
  Announce a{};
  char* base = nullptr;
  if (rank == 0) {
    a.slot_bytes = round_up(std::max<size_t>(slot_bytes, kPage), kPage);
    a.bytes = data_offset(size) + size_t(size) * 2 * a.slot_bytes;
    std::snprintf(a.name, sizeof a.name, "/zt-shm-%d-%d", int(getpid()), counter++);
    int fd = shm_open(a.name, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0) {
      a.err = errno, std::snprintf(a.what, sizeof a.what, "shm_open");
    } else {
      // posix_fallocate reserves the pages now: a full /dev/shm fails here, not as SIGBUS later.
      int rc = ftruncate(fd, off_t(a.bytes)) != 0 ? errno : posix_fallocate(fd, 0, off_t(a.bytes));
      void* p = rc == 0 ? mmap(nullptr, a.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
      if (rc == 0 && p == MAP_FAILED) rc = errno;
      close(fd);
      if (rc != 0) {
        a.err = rc, std::snprintf(a.what, sizeof a.what, "allocating %zu bytes", size_t(a.bytes));
        shm_unlink(a.name);
      } else {
        base = static_cast<char*>(p);
        new (base) Header{kMagic, size, a.slot_bytes};
        for (int q = 0; q < size; ++q) {
          new (base + 64 + size_t(q) * sizeof(ShmRankLine)) ShmRankLine;
          new (base + 64 + size_t(size) * sizeof(ShmRankLine) + size_t(q) * sizeof(ShmWaitLine)) ShmWaitLine;
        }
      }
    }
  }
  check_mpi(MPI_Bcast(&a, sizeof a, MPI_BYTE, 0, comm), "MPI_Bcast");
  ZT_CHECK_AS(ErrorKind::comm, a.err == 0, "[comm] shm: rank 0 could not create the shared segment ", a.name, " (",
              a.what, "): ", std::strerror(a.err));
  int err = 0;
  if (rank != 0) {
    int fd = shm_open(a.name, O_RDWR, 0600);
    void* p = fd >= 0 ? mmap(nullptr, a.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
    if (p == MAP_FAILED) err = errno;
    if (fd >= 0) close(fd);
    if (p != MAP_FAILED) base = static_cast<char*>(p);
    if (base && reinterpret_cast<Header*>(base)->magic != kMagic) err = EINVAL;
  }
  int worst = 0;
  check_mpi(MPI_Allreduce(&err, &worst, 1, MPI_INT, MPI_MAX, comm), "MPI_Allreduce");
  if (rank == 0) shm_unlink(a.name);  // every rank has mapped it (or failed): the name goes now
  std::unique_ptr<ShmSegment> seg;
  if (base) seg.reset(new ShmSegment(base, a.bytes, rank, size, a.slot_bytes));
  ZT_CHECK_AS(ErrorKind::comm, worst == 0, "[comm] shm: a rank could not map the shared segment ", a.name, ": ",
              std::strerror(worst));
  seg->line(rank).pid.store(int32_t(getpid()));
  seg->single_copy_ = probe_single_copy(*seg, comm, single_copy);
  return seg;
}

// Every rank reads a known word from every peer; single copy only if all of them could (a
// container's seccomp policy or Yama's ptrace_scope may forbid process_vm_readv).
bool ShmSegment::probe_single_copy(ShmSegment& seg, MPI_Comm comm, bool wanted) {
  static const uint64_t probe = kMagic;
  seg.publish(&probe);
  check_mpi(MPI_Barrier(comm), "MPI_Barrier");  // every pid and address is in place
  int ok = wanted ? 1 : 0;
  for (int q = 0; q < seg.size_ && ok; ++q) {
    if (q == seg.rank_) continue;
    uint64_t got = 0;
    iovec local{&got, sizeof got}, remote{reinterpret_cast<void*>(uintptr_t(seg.published(q))), sizeof got};
    ok = process_vm_readv(seg.line(q).pid.load(), &local, 1, &remote, 1, 0) == ssize_t(sizeof got) && got == kMagic;
  }
  int all = 0;
  check_mpi(MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, comm), "MPI_Allreduce");
  return all == 1;
}

void ShmSegment::read_peer(int q, uint64_t addr, void* dst, size_t bytes, const ShmWaitFor& w) const {
  constexpr size_t kPiece = size_t(4) << 20;  // re-check w.stop between pieces
  char* d = static_cast<char*>(dst);
  const int32_t pid = line(q).pid.load();
  while (bytes > 0) {
    if (w.stop.load()) ZT_THROW_AS(ErrorKind::comm, peer_error(w, rank_, size_, "the group was stopped"));
    iovec local{d, std::min(bytes, kPiece)}, remote{reinterpret_cast<void*>(uintptr_t(addr)), local.iov_len};
    const ssize_t got = process_vm_readv(pid, &local, 1, &remote, 1, 0);
    if (got <= 0) {
      const int e = got < 0 ? errno : EIO;
      ZT_THROW_AS(ErrorKind::comm, peer_error(w, rank_, size_,
                                              e == ESRCH ? zt::detail::concat("rank ", q, " (pid ", pid, ") died")
                                                         : zt::detail::concat("reading rank ", q,
                                                                              "'s buffer failed: ", std::strerror(e))));
    }
    d += got, addr += uint64_t(got), bytes -= size_t(got);
  }
}

void ShmSegment::post(uint32_t k) {
  std::atomic<uint32_t>& word = line(rank_).arrived;
  word.store(k, std::memory_order_seq_cst);
  // Dekker with wait_one: either we see its waiter count, or it sees our new value.
  if (wait_line(rank_).waiters.load(std::memory_order_seq_cst) != 0) futex(&word, FUTEX_WAKE, INT_MAX, nullptr);
}

void ShmSegment::wait_all(uint32_t k, const ShmWaitFor& w) const {
  for (int q = 0; q < size_; ++q)
    if (q != rank_) wait_one(q, k, w);
}

void ShmSegment::check_peer(int q, const ShmWaitFor& w) const {
  const ShmRankLine& l = line(q);
  if (w.stop.load()) ZT_THROW_AS(ErrorKind::comm, peer_error(w, rank_, size_, "the group was stopped"));
  // A peer broken at this same collective may just have timed out with us: only earlier counts.
  const uint64_t failed = l.failed_seq.load();
  if (failed != 0 && failed < w.seq)
    ZT_THROW_AS(ErrorKind::comm,
                peer_error(w, rank_, size_,
                           zt::detail::concat("rank ", q, " gave up on the group at #", failed, " after a failure")));
  if (l.left.load())
    ZT_THROW_AS(ErrorKind::comm, peer_error(w, rank_, size_, zt::detail::concat("rank ", q, " left the group")));
  const int32_t pid = l.pid.load();
  if (pid > 0 && kill(pid, 0) != 0 && errno == ESRCH)
    ZT_THROW_AS(ErrorKind::comm, peer_error(w, rank_, size_, zt::detail::concat("rank ", q, " (pid ", pid, ") died")));
  if (ShmClock::now() >= w.deadline)
    ZT_THROW_AS(ErrorKind::comm,
                timeout_message(w.coll, w.seq, w.timeout_s, rank_, size_, w.label, detail::not_arrived(not_arrived())));
}

void ShmSegment::expect(const CallSignature& sig) {
  line(rank_).sig[sig.seq & 1] = sig;  // published by the next post()
  check_ = true;
  check_seq_ = sig.seq;
}

void ShmSegment::check_signatures() {
  check_ = false;
  std::vector<CallSignature> all(static_cast<size_t>(size_));  // copied: peers may write the other slot meanwhile
  for (int q = 0; q < size_; ++q) all[size_t(q)] = line(q).sig[check_seq_ & 1];
  if (std::string why = signature_mismatch(all.data(), size_); !why.empty()) ZT_THROW_AS(ErrorKind::comm, why);
}

std::vector<int> ShmSegment::not_arrived() const {
  const uint32_t k = synced_.load();
  std::vector<int> out;
  for (int q = 0; q < size_; ++q)
    if (q != rank_ && !reached(line(q).arrived.load(std::memory_order_acquire), k)) out.push_back(q);
  return out;
}

void ShmSegment::wait_one(int q, uint32_t k, const ShmWaitFor& w) const {
  std::atomic<uint32_t>& word = line(q).arrived;
  for (int i = 0; i < kSpin; ++i) {
    if (reached(word.load(std::memory_order_acquire), k)) return;
    cpu_relax();
  }
  std::atomic<uint32_t>& waiters = wait_line(q).waiters;
  while (!reached(word.load(std::memory_order_acquire), k)) {
    check_peer(q, w);
    auto left = std::chrono::duration_cast<std::chrono::nanoseconds>(w.deadline - ShmClock::now());
    auto ns = std::max<int64_t>(1000, std::min<int64_t>(left.count(), std::chrono::nanoseconds(kSlice).count()));
    timespec ts{time_t(ns / 1000000000), long(ns % 1000000000)};
    waiters.fetch_add(1, std::memory_order_seq_cst);
    const uint32_t v = word.load(std::memory_order_seq_cst);
    if (!reached(v, k)) futex(&word, FUTEX_WAIT, v, &ts);
    waiters.fetch_sub(1, std::memory_order_seq_cst);
  }
  std::atomic_thread_fence(std::memory_order_acquire);
}

}  // namespace zt::comm::detail
