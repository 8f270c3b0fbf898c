// Optimizer offload to disk (Note [optimizer swap]): the offloaded AdamW update in elements/s
// against the disk's own sequential write and read bandwidth, measured in the same run through
// the same SwapFile (record size, O_DIRECT, queue depth, tile buffers), and against AdamW in
// memory. Prints JSON lines per size and dtype: op "disk", "adam_memory", "adam_offload"; each
// figure is the median of --steps rounds (disk rounds and offloaded steps alternate).
// Usage: zt_bench_offload [--sizes 16M,64M,128M] [--dtypes f32,bf16] [--dir .cache/bench_offload]
//          [--steps 3] [--threads all] [--tile E] [--buffers B] [--queue-depth Q] [--block-bytes B]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "optim_shard.h"
#include "swap_file.h"
#include "zt/core/parallel.h"
#include "zt/zero/plan.h"

using namespace zt;
using Clock = std::chrono::steady_clock;

namespace {

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// "16M" = 16 * 2^20 elements; K, M, G are powers of two.
std::vector<int64_t> parse_sizes(const std::string& s) {
  std::vector<int64_t> out;
  for (size_t at = 0; at < s.size();) {
    const size_t comma = std::min(s.find(',', at), s.size());
    std::string item = s.substr(at, comma - at);
    int shift = 0;
    if (!item.empty() && std::string("KMG").find(item.back()) != std::string::npos) {
      shift = 10 * int(1 + std::string("KMG").find(item.back()));
      item.pop_back();
    }
    out.push_back(std::atoll(item.c_str()) << shift);
    at = comma + 1;
  }
  return out;
}

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  for (size_t at = 0; at < s.size();) {
    const size_t comma = std::min(s.find(',', at), s.size());
    out.push_back(s.substr(at, comma - at));
    at = comma + 1;
  }
  return out;
}

// One buffer of model states, unsharded: the plan OptimShard streams (stage 0, one rank).
zero::Plan make_plan(int64_t n, DType dtype, const zero::SwapOptions& so) {
  zero::Policy policy = zero::make_policy(0, dtype, {}, {});
  policy.optimizer_residence = zero::Residence::file;
  policy.swap = so;
  zero::PlanInput in;
  in.numels = {n};
  in.reduce_bucket_size = n;
  return zero::make_plan(in, policy, 1);
}

// The ceiling: a swap file like the update's (same records, slots, options), filled once so that
// timed writes overwrite allocated blocks as the update's do. Each round writes every tile in
// order, reads them back, then runs the update's own pattern (read tile t+1, write tile t) with
// no update between: what the offloaded step costs if compute were free.
class Probe {
 public:
  Probe(const std::string& path, int64_t tiles, size_t record, const zero::SwapOptions& so)
      : file_(path, tiles, record, so.buffers, so), tiles_(tiles), slots_(so.buffers) {
    for (int s = 0; s < slots_; ++s) {
      bufs_.emplace_back(static_cast<float*>(std::aligned_alloc(4096, record)), &std::free);
      std::fill_n(bufs_.back().get(), record / 4, 0.5f + float(s));  // not zeros: a thin disk may skip those
    }
    pass(false);
  }
  bool direct() const { return file_.direct(); }
  void round() {
    auto t0 = Clock::now();
    pass(false);
    write_s.push_back(since(t0));
    t0 = Clock::now();
    pass(true);
    read_s.push_back(since(t0));
    t0 = Clock::now();
    stream();
    stream_s.push_back(since(t0));
  }
  std::vector<double> write_s, read_s, stream_s;

 private:
  float* buf(int64_t t) { return bufs_[size_t(t % slots_)].get(); }
  void pass(bool read) {  // every tile in order, up to `slots_` records in flight
    for (int64_t t = 0; t < tiles_; ++t) {
      file_.wait(int(t % slots_));
      if (read)
        file_.read(t, buf(t), int(t % slots_));
      else
        file_.write(t, buf(t), int(t % slots_));
    }
    file_.wait_all();
  }
  void stream() {  // as OptimShard::run_tiles: with one buffer the next read waits for the write
    auto start_read = [&](int64_t t) {
      file_.wait(int(t % slots_));  // the write that last used that buffer
      file_.read(t, buf(t), int(t % slots_));
    };
    if (tiles_ > 0) start_read(0);
    for (int64_t t = 0; t < tiles_; ++t) {
      file_.wait(int(t % slots_));
      if (slots_ > 1 && t + 1 < tiles_) start_read(t + 1);
      file_.write(t, buf(t), int(t % slots_));
      if (slots_ == 1 && t + 1 < tiles_) start_read(t + 1);
    }
    file_.wait_all();
  }
  zero::SwapFile file_;
  int64_t tiles_;
  int slots_;
  std::vector<std::unique_ptr<float, decltype(&std::free)>> bufs_;
};

// Seconds per optim::update in memory (median of `steps`, after a warm-up that pages all in).
double memory_step(int64_t n, DType dtype, const config::OptimizerConfig& spec, int steps) {
  optim::UpdateArgs a;
  a.param = Tensor::full({n}, 0.5f, dtype);
  if (dtype != DType::f32) a.master = Tensor::full({n}, 0.5f);
  a.grad = Tensor::full({n}, 0.01f, dtype);
  for (size_t k = 0; k < optim::state_names(spec).size(); ++k) a.states.push_back(Tensor::zeros({n}));
  a.lr = 1e-3f;
  optim::update(spec, a);
  std::vector<double> s;
  for (int i = 0; i < steps; ++i) {
    a.step = i + 2;
    const auto t0 = Clock::now();
    optim::update(spec, a);
    s.push_back(since(t0));
  }
  return median(s);
}

// One size and dtype: the disk's rounds, AdamW in memory and offloaded; three JSON lines.
void run_case(int64_t n, const std::string& dt, const zero::SwapOptions& so, const config::OptimizerConfig& spec,
              int steps) {
  const DType dtype = dtype_from_name(dt);
  const std::string& dir = so.dir;
  const zero::Plan plan = make_plan(n, dtype, so);
  const int64_t tile = plan.swap_tile_elems(), tiles = (plan.buffers[0].padded + tile - 1) / tile;
  const int64_t k = (plan.policy.fp32_master ? 1 : 0) + 2;  // swapped fp32 tensors: master?, exp_avg, exp_avg_sq
  const size_t record = size_t(k * tile * 4);
  const double io_bytes = double(tiles) * double(record);  // each way, per step
  const nlohmann::json common = {{"bench", "offload"},
                                 {"type", "AdamW"},
                                 {"dtype", dt},
                                 {"n", n},
                                 {"threads", num_threads()},
                                 {"swapped_bytes_per_elem", k * 4},
                                 {"tile_elems", tile},
                                 {"buffers", so.buffers},
                                 {"queue_depth", so.queue_depth},
                                 {"block_bytes", so.block_bytes}};

  const double mem_s = memory_step(n, dtype, spec, steps);

  // The disk's rounds and the update's steps alternate, so load on this shared machine
  // weighs on both alike; each figure is the median of `steps`.
  Probe probe(dir + "/disk_probe.swap", tiles, record, so);
  const Tensor params = Tensor::full({plan.buffers[0].padded}, 0.5f, dtype);
  const Tensor grads = Tensor::full({plan.buffers[0].padded}, 0.01f, dtype);
  zero::OptimShard shard(plan, spec, 0, [&](size_t) { return params; });
  shard.update(0, params, grads, 1e-3f, 1.f);  // warm-up: the first read of every tile
  shard.finish_step();
  const zero::SwapStats before = shard.swap_stats();
  std::vector<double> off;
  for (int i = 0; i < steps; ++i) {
    probe.round();
    const auto t0 = Clock::now();
    shard.update(0, params, grads, 1e-3f, 1.f);
    shard.finish_step();
    off.push_back(since(t0));
  }
  const zero::SwapStats st = shard.swap_stats();
  const double write_s = median(probe.write_s), read_s = median(probe.read_s);
  const double stream_s = median(probe.stream_s), off_s = median(off);
  // Read + write of the same bytes one after the other: elements/s if the update cost nothing.
  const double ceiling = double(n) / (write_s + read_s), rate = double(n) / off_s;
  nlohmann::json j = common;
  j.update({{"op", "disk"},
            {"direct", probe.direct()},
            {"dir", dir},
            {"file_bytes", io_bytes},
            {"write_gbps", io_bytes / write_s / 1e9},
            {"read_gbps", io_bytes / read_s / 1e9},
            {"rw_gbps", 2 * io_bytes / (write_s + read_s) / 1e9},
            {"ceiling_elems_per_s", ceiling},
            {"stream_gbps", 2 * io_bytes / stream_s / 1e9},
            {"stream_elems_per_s", double(n) / stream_s},
            {"write_s_each", probe.write_s},
            {"read_s_each", probe.read_s}});
  std::printf("%s\n", j.dump().c_str());
  j = common;
  j.update({{"op", "adam_memory"}, {"step_s", mem_s}, {"elems_per_s", double(n) / mem_s}});
  std::printf("%s\n", j.dump().c_str());
  double load[1] = {0};
  getloadavg(load, 1);
  j = common;
  j.update({{"op", "adam_offload"},
            {"direct", st.direct},
            {"step_s", off_s},
            {"step_s_each", off},
            {"elems_per_s", rate},
            {"io_gbps", 2 * io_bytes / off_s / 1e9},
            {"io_wait_s", (st.io_wait_s - before.io_wait_s) / steps},
            {"compute_s", (st.compute_s - before.compute_s) / steps},
            {"of_ceiling", rate / ceiling},
            {"of_stream", stream_s / off_s},
            {"vs_memory", mem_s / off_s},
            {"loadavg_1m", load[0]}});
  std::printf("%s\n", j.dump().c_str());
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    std::vector<int64_t> sizes = parse_sizes("16M,64M,128M");
    std::vector<std::string> dtypes = {"f32", "bf16"};
    std::string dir = ".cache/bench_offload";
    int steps = 3;
    zero::SwapOptions so;
    for (int i = 1; i + 1 < argc; i += 2) {
      const std::string a = argv[i], v = argv[i + 1];
      if (a == "--sizes")
        sizes = parse_sizes(v);
      else if (a == "--dtypes")
        dtypes = split(v);
      else if (a == "--dir")
        dir = v;
      else if (a == "--steps")
        steps = std::max(1, std::atoi(v.c_str()));
      else if (a == "--threads")
        set_num_threads(std::atoi(v.c_str()));
      else if (a == "--tile")
        so.tile_elems = std::atoll(v.c_str());
      else if (a == "--buffers")
        so.buffers = std::atoi(v.c_str());
      else if (a == "--queue-depth")
        so.queue_depth = std::atoi(v.c_str());
      else if (a == "--block-bytes")
        so.block_bytes = std::atoll(v.c_str());
      else
        throw std::runtime_error("unknown flag " + a);
    }
    if (!zero::SwapFile::available()) {  // built without liburing: nothing to measure
      std::fprintf(stderr, "zt_bench_offload: optimizer offload is not available in this build; skipped\n");
      return 0;
    }
    so.dir = dir;
    std::filesystem::create_directories(dir);
    config::OptimizerConfig spec;
    spec.type = "AdamW";
    spec.weight_decay = 0.01f;
    for (const std::string& dt : dtypes) {
      for (const int64_t n : sizes) {
        run_case(n, dt, so, spec, steps);
      }
    }
    std::error_code ec;  // the swap files are gone with their owners; empty folders only
    std::filesystem::remove(dir + "/rank0", ec);
    std::filesystem::remove(dir, ec);
    return 0;
  } catch (const std::exception& ex) {
    std::fprintf(stderr, "zt_bench_offload: %s\n", ex.what());
    return 1;
  }
}
