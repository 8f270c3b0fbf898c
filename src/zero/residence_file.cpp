// Note [residence tiers]: the file tier. Note [optimizer swap]: a shard's tensors live in one swap file,
// tile by tile: record t holds elements [tT, (t+1)T) of tensor 0, then of tensor 1, ..., T a
// multiple of 1024 so a record is whole 4 KiB pages. A visit streams the records through the
// shard's tile buffers: the next tiles are read (buffers - 2 of them, at least one) while tile i
// is visited, and tile i-1 is written. Every record is checked against the xxh64 it was written
// with. Note [fresh swap files]: no record exists before the first visit, which fills each tile
// buffer with the fresh values instead of reading it: start-up writes nothing, and step 1 reads
// nothing; a checkpoint of a fresh file reads those values the same way, and a write to one
// writes the whole file first. Parameter files (param_store.cpp) start fresh too where the values
// are initialisers': each read of such a shard computes it (Note [counter init]) until its first
// update writes the file.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <utility>

#include "residence.h"
#include "swap_file.h"

namespace zt::zero {
namespace {

std::vector<Tensor>& no_slots() {  // a file read and written whole
  static std::vector<Tensor> none;
  return none;
}

class FileResidence final : public ShardResidence {
 public:
  FileResidence(const std::string& path, int64_t numel, size_t count, const FileTiles& tiles,
                std::function<Tensor()> initial)
      : numel_(numel),
        count_(int64_t(count)),
        tile_(tiles.tile),
        es_(dtype_size(tiles.dtype)),
        dtype_(tiles.dtype),
        slots_(tiles.slots ? *tiles.slots : no_slots()),
        initial_(std::move(initial)) {
    // One I/O slot per tile buffer, or per record where the file is read whole (start_read).
    const int64_t records = (numel + tile_ - 1) / tile_;
    file_ = std::make_unique<SwapFile>(path, records, size_t(count_ * tile_) * es_,
                                       int(slots_.empty() ? records : int64_t(slots_.size())), tiles.opts);
  }

  int64_t numel() const override { return numel_; }
  Device device() const override { return Device::cpu(); }

  void visit(const TileFn& fn, const TileFn& fresh) override {
    ZT_ASSERT(dtype_ == DType::f32 && !slots_.empty(), "visit of a swap file without f32 tile buffers");
    const bool was_fresh = fresh_;
    Tensor init;  // the initial values, fetched once, where `fresh` does not fill the tiles
    std::vector<Tensor> views(static_cast<size_t>(count_));
    run_tiles(
        [&](int64_t t, int64_t len, Tensor rec) {
          const int64_t begin = t * tile_;
          for (int64_t j = 0; j < count_; ++j) views[size_t(j)] = rec.slice(0, j * tile_, j * tile_ + len);
          if (was_fresh) {
            rec.zero_();  // fresh tensors, and zeros past the last element
            if (fresh) {
              fresh(begin, len, views);
            } else if (initial_ && count_ > 0) {
              if (!init.defined()) init = initial_();
              views[0].copy_(init.slice(0, begin, begin + len));
            }
          }
          fn(begin, len, views);
        },
        /*read_first=*/!was_fresh);
    fresh_ = false;
  }

  ShardTensor tensor(size_t j, const std::string& name) override {
    ShardTensor t;
    t.name = name;
    t.numel = numel_;
    t.dtype = dtype_;
    auto initial = std::make_shared<Tensor>();  // a fresh tensor 0's values, fetched once per handle
    t.read_fn = [this, j, initial](int64_t begin, int64_t n, void* dst) {
      if (!fresh_) return range(j, begin, n, dst, nullptr);
      if (j == 0 && initial_) {
        if (!initial->defined()) *initial = initial_().to(Device::cpu());
        const Tensor v = initial->slice(0, begin, begin + n).to(dtype_);
        std::memcpy(dst, v.raw_data(), size_t(n) * es_);
      } else {
        std::memset(dst, 0, size_t(n) * es_);
      }
    };
    t.write_fn = [this, j](int64_t begin, int64_t n, const void* src) {
      if (fresh_) visit([](int64_t, int64_t, const std::vector<Tensor>&) {}, nullptr);  // the whole file first
      range(j, begin, n, nullptr, src);
    };
    return t;
  }

  SwapStats stats() const override { return file_->stats(); }

  void start_read(void* dst) override {
    ZT_ASSERT(!fresh_ && !reading_, "whole read of ", file_->path(), fresh_ ? " before its first write" : " twice");
    char* base = static_cast<char*>(dst);
    for (int64_t t = 0; t * tile_ < numel_; ++t) file_->read(t, base + size_t(t) * file_->record_bytes(), int(t));
    reading_ = true;
  }
  void finish_read() override {
    if (std::exchange(reading_, false)) file_->wait_all();
  }
  void write_whole(const void* src) override {
    ZT_ASSERT(!reading_, "write of ", file_->path(), " while it is read");
    const char* base = static_cast<const char*>(src);
    for (int64_t t = 0; t * tile_ < numel_; ++t) file_->write(t, base + size_t(t) * file_->record_bytes(), int(t));
    file_->wait_all();
    fresh_ = false;
  }

 private:
  // Tiles in order through the tile buffers: the next tiles are read (read_first) while fn visits
  // tile i, whose write then goes out behind it.
  void run_tiles(const std::function<void(int64_t, int64_t, Tensor)>& fn, bool read_first) {
    SwapFile& f = *file_;
    const int S = int(slots_.size());
    const int64_t tiles = (numel_ + tile_ - 1) / tile_;
    auto start_read = [&](int64_t t) {
      const int s = int(t % S);
      f.wait(s);  // the write that last used this buffer
      f.read(t, slots_[size_t(s)].raw_data(), s);
    };
    // Reads run `ahead` tiles in front of the visit, so the disk always has a read queued; one
    // buffer is being visited and one written behind (S = 2, 3: one ahead; S = 1: none).
    const int64_t ahead = std::max(1, S - 2);
    if (read_first)
      for (int64_t t = 0; t < std::min(S > 1 ? ahead : 1, tiles); ++t) start_read(t);
    for (int64_t t = 0; t < tiles; ++t) {
      const int s = int(t % S);
      f.wait(s);
      if (read_first && S > 1 && t + ahead < tiles) start_read(t + ahead);
      fn(t, std::min(tile_, numel_ - t * tile_), slots_[size_t(s)]);
      f.write(t, slots_[size_t(s)].raw_data(), s);
      if (read_first && S == 1 && t + 1 < tiles) start_read(t + 1);
    }
    f.wait_all();
  }

  // Elements [begin, begin + n) of tensor j read into dst or written from src, through a tile
  // buffer (or a record of scratch where the file has none).
  void range(size_t j, int64_t begin, int64_t n, void* dst, const void* src) {
    Tensor scratch;
    if (slots_.empty()) {
      TagScope tag(MemTag::workspace);
      scratch = page_aligned(int64_t(file_->record_bytes()), dtype_);
    }
    void* rec = slots_.empty() ? scratch.raw_data() : slots_[0].raw_data();
    swap_range(*file_, rec, tile_, es_, j, begin, n, dst, src);
  }

  int64_t numel_, count_, tile_;
  size_t es_;
  DType dtype_;
  std::vector<Tensor>& slots_;
  std::function<Tensor()> initial_;
  std::unique_ptr<SwapFile> file_;
  bool fresh_ = true;
  bool reading_ = false;  // start_read's records in flight
};

}  // namespace

std::unique_ptr<ShardResidence> file_residence(const std::string& path, int64_t numel, size_t count,
                                               const FileTiles& tiles, std::function<Tensor()> initial) {
  return std::make_unique<FileResidence>(path, numel, count, tiles, std::move(initial));
}

namespace {

// This rank's swap folder and the tile buffers its files share.
void share_tiles(const Plan& plan, int rank, TierShared& s) {
  s.dir = make_swap_folder(plan.policy.swap.dir, rank);
  s.tile = plan.swap_tile_elems();
  TagScope tag(MemTag::optim);
  for (int i = 0; i < plan.policy.swap.buffers; ++i) s.slots.push_back(page_aligned(plan.swap_slot_bytes() - 4096, DType::f32));
}

std::unique_ptr<ShardResidence> file_optimizer_buffer(const OptimBuffer& a) {
  return file_residence(a.shared.dir + "/b" + std::to_string(a.b) + ".swap", a.n, a.count,
                        {&a.shared.slots, a.shared.tile, a.plan.policy.swap}, a.master ? a.initial : nullptr);
}

// Note [optimizer swap]: only the tile buffers stay in memory.
void account_tiles(const Plan& plan, MemoryEstimate& e) {
  e.master = 0;
  e.optim = plan.policy.swap.buffers * plan.swap_slot_bytes();
}

}  // namespace

const ResidenceTier& file_tier() {
  static const ResidenceTier t{.name = "swap files",
                               .offload_device = "nvme",
                               .medium = Medium::files,
                               .share = &share_tiles,
                               .optimizer_buffer = &file_optimizer_buffer,
                               .account = &account_tiles};
  return t;
}

}  // namespace zt::zero
