// SwapFile with io_uring: each record is split into aio.block_size pieces, queued on one ring of
// aio.queue_depth entries, and completed per slot, so reading tile i+1 and writing tile i-1
// proceed while tile i is updated. O_DIRECT keeps the page cache out of the way where the
// filesystem allows it (tmpfs does not: plain I/O there).
#include <fcntl.h>
#include <liburing.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "swap_file.h"
#include "zt/core/error.h"

namespace zt::zero {

namespace {
constexpr ErrorKind kIo = ErrorKind::checkpoint;
std::string errno_text(int e) { return std::strerror(e); }
}  // namespace

struct SwapFile::Impl {
  struct Slot {
    int pending = 0;  // pieces not yet completed
    bool reading = false;
    int64_t tile = -1;
    const void* buf = nullptr;
    std::string error;  // the first failure of this operation
  };
  io_uring ring{};
  bool ring_ok = false;
  int fd = -1;
  bool direct = false;
  SwapOptions opts;
  int64_t tiles = 0;
  std::vector<Slot> slots;
  std::vector<uint64_t> sums;  // xxh64 of each record as written
  std::vector<bool> written;

  // One completion: its slot is in the high half of user_data, the piece's length in the low.
  void complete(io_uring_cqe* c, const std::string& path, size_t record) {
    const int s = int(c->user_data >> 32);
    const int64_t want = int64_t(c->user_data & 0xffffffffu);
    Slot& slot = slots[size_t(s)];
    if (slot.error.empty() && c->res != want) {
      const uint64_t at = uint64_t(slot.tile) * record;
      slot.error = c->res < 0 ? detail::concat("[offload] ", path, ": ", slot.reading ? "reading" : "writing", " tile ",
                                               slot.tile, " at byte offset ", at, " failed: ", errno_text(-c->res))
                   : slot.reading
                       ? detail::concat("[offload] ", path, " is truncated: tile ", slot.tile, " at byte offset ", at,
                                        " read ", c->res, " of ", want, " bytes of a piece")
                       : detail::concat("[offload] ", path, ": tile ", slot.tile, " at byte offset ", at, " wrote ",
                                        c->res, " of ", want, " bytes (disk full?)");
    }
    --slot.pending;
    io_uring_cqe_seen(&ring, c);
  }
  // Reaps at least one completion (waiting for it when `block`).
  bool reap(bool block, const std::string& path, size_t record) {
    io_uring_cqe* c = nullptr;
    const int rc = block ? io_uring_wait_cqe(&ring, &c) : io_uring_peek_cqe(&ring, &c);
    if (rc == -EINTR || rc == -EAGAIN) return false;
    ZT_CHECK_AS(kIo, rc == 0, "[offload] ", path, ": waiting for I/O failed: ", errno_text(-rc));
    complete(c, path, record);
    return true;
  }
  // Queues one record's pieces on `slot`; user_data carries the slot and the piece's length.
  template <typename Prep>
  void queue(const std::string& path, size_t record, int slot, int64_t t, Prep&& prep) {
    const size_t block = size_t(std::max<int64_t>(4096, opts.block_bytes / 4096 * 4096));
    for (size_t off = 0; off < record; off += block) {
      const size_t n = std::min(block, record - off);
      io_uring_sqe* e = sqe(path, record);
      prep(e, off, n, uint64_t(t) * record + off);
      e->user_data = (uint64_t(slot) << 32) | n;
      ++slots[size_t(slot)].pending;
      if (opts.single_submit) io_uring_submit(&ring);
    }
    io_uring_submit(&ring);
  }
  io_uring_sqe* sqe(const std::string& path, size_t record) {
    for (;;) {
      if (io_uring_sqe* e = io_uring_get_sqe(&ring)) return e;
      io_uring_submit(&ring);  // the ring is full: let it drain
      reap(true, path, record);
    }
  }
};

SwapFile::SwapFile(std::string path, int64_t tiles, size_t record_bytes, int slots, const SwapOptions& opts)
    : impl_(std::make_unique<Impl>()), path_(std::move(path)), record_(record_bytes) {
  ZT_CHECK_AS(ErrorKind::invalid_argument, record_bytes % 4096 == 0 && slots > 0 && tiles >= 0,
              "[offload] a swap record must be whole 4 KiB pages, with at least one slot");
  Impl& m = *impl_;
  m.opts = opts;
  m.tiles = tiles;
  m.slots.resize(size_t(slots));
  m.sums.assign(size_t(tiles), 0);
  m.written.assign(size_t(tiles), false);
  // Note [swap path]: a new file of ours, never through a link or onto what is already there.
  clear_stale_swap_file(path_);
  const int flags = O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
  m.fd = ::open(path_.c_str(), flags | O_DIRECT, 0600);
  m.direct = m.fd >= 0;
  if (m.fd < 0 && errno == EINVAL) m.fd = ::open(path_.c_str(), flags, 0600);  // no O_DIRECT here (tmpfs)
  ZT_CHECK_AS(kIo, m.fd >= 0, "[offload] cannot create the swap file ", path_, ": ", errno_text(errno));
  // The whole file's blocks up front: a disk that cannot hold it fails here, not mid-step.
  const off_t size = off_t(uint64_t(tiles) * record_bytes);
  const int rc = size > 0 ? ::posix_fallocate(m.fd, 0, size) : 0;
  if (rc == EOPNOTSUPP || rc == EINVAL) {
    ZT_CHECK_AS(kIo, ::ftruncate(m.fd, size) == 0, "[offload] cannot size ", path_, ": ", errno_text(errno));
  } else if (rc != 0) {
    ::close(m.fd);
    ::unlink(path_.c_str());
    ZT_THROW_AS(kIo, "[offload] cannot reserve ", size, " bytes for the swap file ", path_, ": ", errno_text(rc));
  }
  const int q = io_uring_queue_init(unsigned(std::max(1, opts.queue_depth)), &m.ring, 0);
  if (q < 0) {
    ::close(m.fd);
    ::unlink(path_.c_str());
    ZT_THROW_AS(kIo, "[offload] io_uring cannot start (", errno_text(-q),
                "): this kernel or its seccomp policy forbids it; offload_optimizer.device = nvme needs it");
  }
  m.ring_ok = true;
}

SwapFile::~SwapFile() {
  if (!impl_) return;
  try {
    for (size_t s = 0; s < impl_->slots.size(); ++s)
      while (impl_->slots[s].pending > 0) impl_->reap(true, path_, record_);
  } catch (...) {  // a destructor does not throw; the file goes below anyway
  }
  if (impl_->ring_ok) io_uring_queue_exit(&impl_->ring);
  if (impl_->fd >= 0) ::close(impl_->fd);
  ::unlink(path_.c_str());
}

bool SwapFile::available() { return true; }
bool SwapFile::direct() const { return impl_->direct; }

void SwapFile::read(int64_t t, void* buf, int slot) {
  Impl& m = *impl_;
  ZT_ASSERT(t >= 0 && t < m.tiles && m.slots.at(size_t(slot)).pending == 0, "swap read of tile ", t);
  ZT_CHECK_AS(kIo, m.written[size_t(t)], "[offload] ", path_, ": tile ", t, " is read before it was written");
  m.slots[size_t(slot)] = {0, true, t, buf, {}};
  char* p = static_cast<char*>(buf);
  m.queue(path_, record_, slot, t, [&](io_uring_sqe* e, size_t off, size_t n, uint64_t at) {
    io_uring_prep_read(e, m.fd, p + off, unsigned(n), at);
  });
  if (!m.opts.overlap_events) wait(slot);
}

void SwapFile::write(int64_t t, const void* buf, int slot) {
  Impl& m = *impl_;
  ZT_ASSERT(t >= 0 && t < m.tiles && m.slots.at(size_t(slot)).pending == 0, "swap write of tile ", t);
  m.sums[size_t(t)] = XXH64(buf, record_, 0);
  m.written[size_t(t)] = true;
  m.slots[size_t(slot)] = {0, false, t, buf, {}};
  const char* p = static_cast<const char*>(buf);
  m.queue(path_, record_, slot, t, [&](io_uring_sqe* e, size_t off, size_t n, uint64_t at) {
    io_uring_prep_write(e, m.fd, p + off, unsigned(n), at);
  });
  if (!m.opts.overlap_events) wait(slot);
}

void SwapFile::wait(int slot) {
  Impl& m = *impl_;
  Impl::Slot& s = m.slots.at(size_t(slot));
  const auto t0 = std::chrono::steady_clock::now();
  while (s.pending > 0) m.reap(true, path_, record_);
  (s.reading ? read_wait_s_ : write_wait_s_) +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (s.tile < 0) return;
  const int64_t t = s.tile;
  const bool reading = s.reading;
  s.tile = -1;
  ZT_CHECK_AS(kIo, s.error.empty(), s.error);
  if (!reading) {
    written_bytes_ += record_;
    return;
  }
  read_bytes_ += record_;
  const uint64_t got = XXH64(s.buf, record_, 0);
  ZT_CHECK_AS(kIo, got == m.sums[size_t(t)], "[offload] ", path_, " is corrupt: tile ", t, " at byte offset ",
              uint64_t(t) * record_, " (", record_, " bytes) has xxh64 ", std::hex, got, ", written as ",
              m.sums[size_t(t)]);
}

void SwapFile::wait_all() {
  for (size_t s = 0; s < impl_->slots.size(); ++s) wait(int(s));
}

}  // namespace zt::zero
