// Checkpoint save and load bandwidth per rank beside the disk's own: every rank first writes a
// file of its shard's size with write + fsync (what a save can at best do, all ranks at once),
// then saves and loads real checkpoints of an AdamW MLP (a few hundred MB of states in all).
// Loads start cold: the shard files are dropped from the page cache (posix_fadvise) first.
// Run: mpirun -np 2 bench_ckpt [--hidden 2048,...] [--bucket E] [--dir D] [--repeat R] [--keep]; rank 0
// prints JSON lines (disk, save, load, export), times being the slowest rank's.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "zt/ckpt/checkpoint.h"
#include "zt/ckpt/export.h"
#include "zt/comm/group.h"
#include "zt/core/allocator.h"
#include "zt/core/error.h"
#include "zt/nn/module.h"
#include "zt/zero/engine.h"

using namespace zt;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

double slowest(comm::Group& g, double s) {
  comm::CollOptions o;
  o.op = comm::ReduceOp::max;
  return g.all_reduce_scalar(s, o);
}

// Sequential write of `bytes` in 4 MiB blocks, then fsync: the disk's bandwidth for one file.
void write_fsync(const std::string& path, uint64_t bytes) {
  std::vector<char> block(size_t(4) << 20, 'z');
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  ZT_CHECK(fd >= 0, "[bench] cannot create ", path);
  for (uint64_t done = 0; done < bytes;) {
    const size_t n = size_t(std::min<uint64_t>(block.size(), bytes - done));
    const ssize_t w = ::write(fd, block.data(), n);
    ZT_CHECK(w > 0, "[bench] cannot write ", path);
    done += uint64_t(w);
  }
  ZT_CHECK(::fsync(fd) == 0, "[bench] cannot fsync ", path);
  ::close(fd);
}

void drop_from_cache(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  ::fdatasync(fd);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

std::vector<int64_t> parse_list(const std::string& s) {
  std::vector<int64_t> out;
  for (size_t at = 0; at < s.size();) {
    const size_t comma = s.find(',', at);
    out.push_back(std::atoll(s.substr(at, comma - at).c_str()));
    at = comma == std::string::npos ? s.size() : comma + 1;
  }
  return out;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  try {
    std::vector<int64_t> hidden(10, 2048);  // 39.4M parameters: 473 MB of fp32 AdamW states
    int64_t bucket = 2048 * 2048 + 2048;    // one layer per buffer: the weights are 9x the largest
    std::string dir = (fs::temp_directory_path() / "zt_bench_ckpt").string();
    int repeat = 5;
    bool keep = false;
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      if (a == "--hidden" && i + 1 < argc)
        hidden = parse_list(argv[++i]);
      else if (a == "--dir" && i + 1 < argc)
        dir = argv[++i];
      else if (a == "--bucket" && i + 1 < argc)
        bucket = std::atoll(argv[++i]);
      else if (a == "--repeat" && i + 1 < argc)
        repeat = std::max(1, std::atoi(argv[++i]));
      else if (a == "--keep")
        keep = true;
    }
    comm::GroupPtr g = comm::make_group("auto");
    g->set_timeout(600);
    const int rank = g->rank(), world = g->size();
    auto model = nn::make_mlp(784, hidden, 10, "relu", 1);
    zero::EngineOptions eo;
    eo.zero.stage = 2;
    eo.optimizer.type = "AdamW";
    eo.zero.reduce_bucket_size = bucket;
    zero::Engine e(*model, g, eo);
    if (rank == 0) fs::remove_all(dir), fs::create_directories(dir);
    g->barrier();

    // What this rank's shard file will hold.
    uint64_t rank_bytes = 0;
    for (auto& s : e.shard_states())
      for (auto& t : s.tensors) rank_bytes += uint64_t(e.plan().buffers[s.buffer].padded / world) * dtype_size(t.dtype);

    std::vector<double> disk, save, load;
    std::string path;
    for (int r = 0; r < repeat; ++r) {
      const std::string probe = dir + "/disk_probe_" + std::to_string(rank);
      g->barrier();
      auto t0 = Clock::now();
      write_fsync(probe, rank_bytes);
      disk.push_back(slowest(*g, since(t0)));
      fs::remove(probe);

      g->barrier();
      t0 = Clock::now();
      path = ckpt::save_checkpoint(e, {dir, "step_" + std::to_string(r), 1, {{"step", r}}});
      save.push_back(slowest(*g, since(t0)));

      for (const auto& s : ckpt::read_metadata(path)["shards"])
        drop_from_cache(path + "/" + s["file"].get<std::string>());
      g->barrier();
      t0 = Clock::now();
      ckpt::load_checkpoint(e, path);
      load.push_back(slowest(*g, since(t0)));
    }
    const double gb = double(rank_bytes) / 1e9;
    const nlohmann::json common = {{"bench", "ckpt"},
                                   {"world", world},
                                   {"params", e.num_params()},
                                   {"rank_bytes", rank_bytes},
                                   {"repeat", repeat}};
    auto line = [&](const std::string& op, const std::vector<double>& all) {
      const double s = median(all);
      nlohmann::json j = common;
      j.update({{"op", op},
                {"seconds", s},
                {"seconds_each", all},
                {"gb_per_s_per_rank", gb / s},
                {"gb_per_s_total", gb * world / s}});
      if (op != "disk_write_fsync") j["vs_disk"] = median(disk) / s;
      if (rank == 0) std::printf("%s\n", j.dump().c_str());
    };
    line("disk_write_fsync", disk);
    line("save", save);
    line("load_cold", load);

    if (rank == 0) {  // export of the last checkpoint, one process, streaming
      Allocator& a = Allocator::global();
      a.reset_peaks();
      const size_t before = a.stats().total_current;
      const auto t0 = Clock::now();
      const ckpt::ExportStats st = ckpt::export_safetensors(path, dir + "/model.safetensors");
      const double s = since(t0);
      nlohmann::json j = common;
      j.update({{"op", "export"},
                {"seconds", s},
                {"file_bytes", st.file_bytes},
                {"gb_per_s", double(st.file_bytes) / 1e9 / s},
                {"alloc_peak_bytes", a.stats().total_peak - before},
                {"largest_buffer_bytes", st.largest_buffer_bytes},
                {"checkpoint", path}});
      std::printf("%s\n", j.dump().c_str());
      std::fflush(stdout);
    }
    g->barrier();
    if (rank == 0 && !keep) fs::remove_all(dir);
    return 0;
  } catch (const std::exception& ex) {
    std::fprintf(stderr, "bench_ckpt: %s\n", ex.what());
    return 1;
  }
}
