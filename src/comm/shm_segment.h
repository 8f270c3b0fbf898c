#pragma once
// Internal to the shm backend: one group's shared segment (Note [shm segment layout]) and the
// waits on peers' words: spin briefly, then sleep on a futex, never a long busy-spin (ranks
// and their comm threads outnumber the cores).
#include <mpi.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "zt/comm/group.h"

namespace zt::comm::detail {

using ShmClock = std::chrono::steady_clock;

// One rank's words, written by that rank and read by its peers.
struct alignas(64) ShmRankLine {
  std::atomic<uint32_t> arrived{0};     // sync points passed (wraps); the futex word
  std::atomic<int32_t> pid{0};          // for telling a dead peer from a slow one
  std::atomic<uint32_t> left{0};        // 1 once its group object is gone
  std::atomic<uint64_t> failed_seq{0};  // the collective at which its group broke; 0 = healthy
  std::atomic<uint64_t> addr{0};        // this collective's buffer in its own address space (single copy)
  // Note [collective signatures]: collective s's at [s & 1], written before its first sync point;
  // a peer can write s + 2's only after passing a sync point of s + 1, i.e. after we checked s's.
  CallSignature sig[2];
};
struct alignas(64) ShmWaitLine {
  std::atomic<uint32_t> waiters{0};  // peers asleep on this rank's `arrived`
};

// Who waits, for the errors a wait throws.
struct ShmWaitFor {
  Coll coll;
  uint64_t seq;
  const std::string& label;
  double timeout_s;
  ShmClock::time_point deadline;
  const std::atomic<bool>& stop;  // the local group gave up (wait() timed out, or it is closing)
};

class ShmSegment {
 public:
  // Collective over comm: rank 0 creates, sizes and maps a POSIX segment, peers map it, and
  // its name is unlinked before anyone returns. Every rank uses rank 0's slot_bytes.
  // single_copy: use process_vm_readv when every rank can read every peer (Note [shm single copy]).
  static std::unique_ptr<ShmSegment> create(MPI_Comm comm, size_t slot_bytes, bool single_copy);
  ~ShmSegment();
  ShmSegment(const ShmSegment&) = delete;
  ShmSegment& operator=(const ShmSegment&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  size_t slot_bytes() const { return slot_bytes_; }
  // Rank q's staging buffer for a data step (double buffered: steps alternate buffers).
  char* slot(int q, uint64_t step) const { return base_ + data_off_ + (size_t(q) * 2 + (step & 1)) * slot_bytes_; }
  ShmRankLine& line(int q) const { return reinterpret_cast<ShmRankLine*>(base_ + kLinesOff)[q]; }

  void post(uint32_t k);  // this rank passed sync point k: publish it and wake sleeping peers
  // Blocks until every peer has posted k. Throws ErrorKind::comm at the deadline (the timeout
  // message), when w.stop is set, or when a peer left, died or broke at an earlier collective.
  void wait_all(uint32_t k, const ShmWaitFor& w) const;
  // The next sync point: post it, then wait for every peer (the comm thread only).
  void sync(const ShmWaitFor& w) {
    const uint32_t k = synced_.load() + 1;
    synced_.store(k);  // first, so that not_arrived() never lists a peer for a point it passed
    post(k);
    wait_all(k, w);
    if (check_) check_signatures();
  }
  // Note [collective signatures]: publishes this rank's signature for the collective about to
  // run; its first sync() then compares every rank's (ErrorKind::comm on a mismatch).
  void expect(const CallSignature& sig);
  // The peers that have not posted this rank's latest sync point (any thread may ask).
  std::vector<int> not_arrived() const;

  // Note [shm single copy]: whether peers' buffers can be read in place (process_vm_readv).
  bool single_copy() const { return single_copy_; }
  // This rank's buffer for the running collective; peers see it after the next sync().
  void publish(const void* p) { line(rank_).addr.store(uint64_t(reinterpret_cast<uintptr_t>(p))); }
  uint64_t published(int q) const { return line(q).addr.load(); }
  // Copies `bytes` at peer q's address `addr` into dst. Throws ErrorKind::comm naming w's
  // collective when the peer is gone, refuses, or w.stop is set.
  void read_peer(int q, uint64_t addr, void* dst, size_t bytes, const ShmWaitFor& w) const;

 private:
  static constexpr size_t kLinesOff = 64;
  ShmSegment(char* base, size_t bytes, int rank, int size, size_t slot_bytes);
  ShmWaitLine& wait_line(int q) const {
    return reinterpret_cast<ShmWaitLine*>(base_ + kLinesOff + size_t(size_) * sizeof(ShmRankLine))[q];
  }
  void wait_one(int q, uint32_t k, const ShmWaitFor& w) const;
  static bool probe_single_copy(ShmSegment& seg, MPI_Comm comm, bool wanted);
  void check_peer(int q, const ShmWaitFor& w) const;
  void check_signatures();

  char* base_;
  size_t bytes_;
  int rank_, size_;
  size_t slot_bytes_, data_off_;
  bool single_copy_ = false;
  std::atomic<uint32_t> synced_{0};  // sync points posted; written by the comm thread only
  bool check_ = false;               // expect() was called and no sync since (comm thread only)
  uint64_t check_seq_ = 0;
};

}  // namespace zt::comm::detail
