// Note [checkpoint format]: <dir>/<tag>/metadata.json + rank_RRRRR.bin per saving rank. Rank r's
// file holds, for every flat buffer b and every tensor of its shard state (param, master,
// exp_avg, ...), the elements [r*S_b, (r+1)*S_b) of that buffer's padded layout (S_b = padded /
// world, whatever the stage: at stage 0 each rank writes its 1/N), at offsets that are the same
// in every rank's file ("entries"). metadata.json names the parameters (model order) and where
// each sits in the saved buffers, so a loader at any world size or stage can find any element.
// Saving writes <tag>.partial/, fsyncs, renames it to <tag>, then moves `latest`.
#include "zt/ckpt/checkpoint.h"

#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <thread>

#include "checkpoint_detail.h"
#include "file_io.h"
#include "zt/core/atomic_file.h"
#include "zt/core/error.h"

namespace zt::ckpt {

namespace fs = std::filesystem;
using nlohmann::json;

namespace detail {

std::string entry_key(size_t buffer, const std::string& tensor) { return "b" + std::to_string(buffer) + "." + tensor; }

void agree(comm::Group& g, const std::string& error, const std::string& what) {
  comm::agree_on_error(g, error, "checkpoint " + what, ErrorKind::checkpoint);
}

}  // namespace detail

namespace {

constexpr int64_t kChunkElems = int64_t(1) << 20;  // a swapped tensor's elements per read

json describe(zero::Engine& e, const std::vector<zero::ShardState>& states, json& entries, uint64_t& file_bytes) {
  const zero::Plan& plan = e.plan();
  json m;
  m["format"] = kCheckpointFormat;
  m["world_size"] = plan.world;
  m["stage"] = plan.policy.stage;
  m["dtype"] = dtype_name(plan.policy.param_dtype);
  m["optimizer"] = e.options().optimizer.type;
  json params = json::array();
  for (size_t i = 0; i < e.params().size(); ++i)
    params.push_back({{"name", e.param_names()[i]}, {"shape", e.params()[i].shape()}});
  m["params"] = params;
  json buffers = json::array();
  for (auto& b : plan.buffers) {
    json slots = json::array();
    for (auto& s : b.params) slots.push_back({s.index, s.offset, s.numel});
    buffers.push_back({{"numel", b.numel}, {"padded", b.padded}, {"params", slots}});
  }
  m["buffers"] = buffers;
  entries = json::object();
  file_bytes = 0;
  for (auto& s : states) {
    const int64_t n = plan.buffers[s.buffer].padded / plan.world;
    for (auto& t : s.tensors) {
      entries[detail::entry_key(s.buffer, t.name)] = {{"dtype", dtype_name(t.dtype)}, {"offset", file_bytes}, {"numel", n}};
      file_bytes += uint64_t(n) * dtype_size(t.dtype);
    }
  }
  m["entries"] = entries;
  return m;
}

// This rank's canonical slice of every shard-state tensor, in `entries` order, to `sink`; a
// swapped or device tensor streams through one chunk (Note [optimizer swap]).
void for_each_shard_piece(const std::vector<zero::ShardState>& states, const zero::Plan& plan, int rank,
                          const std::function<void(const void*, size_t)>& sink) {
  std::vector<char> chunk;
  for (auto& s : states) {
    const zero::Range c = zero::shard_range(plan.buffers[s.buffer].padded, plan.world, rank);
    for (auto& t : s.tensors) {
      if (!t.streamed() && t.tensor.device().is_cpu()) {
        const Tensor slice = t.tensor.slice(0, c.begin - s.offset, c.end - s.offset);
        sink(slice.raw_data(), slice.nbytes());
        continue;
      }
      const size_t elem = dtype_size(t.dtype);
      for (int64_t e = c.begin; e < c.end; e += kChunkElems) {
        const int64_t n = std::min(kChunkElems, c.end - e);
        chunk.resize(size_t(n) * elem);
        t.read(e - s.offset, n, chunk.data());
        sink(chunk.data(), chunk.size());
      }
    }
  }
}

void prune(const fs::path& dir, const std::string& keep_tag, int keep_last) {
  if (keep_last <= 0) return;
  std::vector<std::string> tags = list_checkpoints(dir.string());
  int64_t excess = int64_t(tags.size()) - keep_last;
  for (const auto& t : tags) {
    if (excess <= 0) break;
    if (t == keep_tag) continue;
    fs::remove_all(dir / t);
    --excess;
  }
}

// Rank 0 makes <tag>.partial (removing what a crash mid-save left); one agreed error otherwise.
void prepare(comm::Group& g, const SaveOptions& o, const fs::path& partial, const fs::path& final_dir) {
  const fs::path dir(o.dir);
  std::string err;
  try {
    check_tag(o.tag, "cannot save as");
    ZT_CHECK_AS(ErrorKind::checkpoint, !o.dir.empty(), "[ckpt] checkpoint.dir is empty");
    if (g.rank() == 0) {
      fs::create_directories(dir);
      if (o.keep_existing) {
        ZT_CHECK_AS(ErrorKind::checkpoint, !fs::exists(fs::symlink_status(final_dir)), "[ckpt] ", final_dir.string(),
                    " already exists; nothing existing is replaced without --force");
        ZT_CHECK_AS(ErrorKind::checkpoint, !fs::exists(fs::symlink_status(dir / "latest")), "[ckpt] ", o.dir,
                    " already holds checkpoints (", (dir / "latest").string(),
                    "): this save would move `latest`; nothing existing is replaced without --force");
      }
      // `latest` is renamed over at the commit: what is there must be the file we keep there.
      struct stat st{};
      const std::string latest = (dir / "latest").string();
      ZT_CHECK_AS(ErrorKind::checkpoint, ::lstat(latest.c_str(), &st) != 0 || S_ISREG(st.st_mode), "[ckpt] ", latest,
                  " is ", file_type_name(st.st_mode),
                  ", not the file that names the newest checkpoint: left as it is; remove it to save here");
      fs::remove_all(partial);  // what a crash mid-save left
      fs::create_directory(partial);
    }
  } catch (const std::exception& ex) {
    err = ex.what();
    if (err.rfind("[ckpt]", 0) != 0) err = "[ckpt] cannot prepare " + partial.string() + ": " + err;
  }
  detail::agree(g, err, "preparing " + partial.string());
}

}  // namespace

// One save from its snapshot to its commit. The metadata is taken when the save starts (the
// counters of that step), the shard's checksum and size when its file is written.
struct Saver::Job {
  SaveOptions opts;
  fs::path partial, final_dir;
  json meta;
  uint64_t expected = 0, bytes = 0, sum = 0;
  std::string error;              // this rank's write failure ("" if none)
  std::atomic<bool> written{false};
  std::thread writer;             // async: writes `staging` to the shard file

  void finish(detail::FileWriter& w) {  // fsynced and closed: its size and checksum, then the fault hook
    w.finish();
    bytes = w.bytes();
    sum = w.checksum();
    if (opts.after_shard_written) opts.after_shard_written();
  }
};

Saver::Saver(zero::Engine& engine, std::function<void(const std::string&)> on_commit)
    : engine_(engine), on_commit_(std::move(on_commit)) {}

Saver::~Saver() {
  if (job_ && job_->writer.joinable()) job_->writer.join();  // unwinding: the write ends, nothing is committed
}

std::string Saver::save(const SaveOptions& o, bool async) {
  wait();  // one save in flight at most
  comm::Group& g = *engine_.group();
  auto job = std::make_unique<Job>();
  job->opts = o;
  job->partial = fs::path(o.dir) / (o.tag + ".partial");
  job->final_dir = fs::path(o.dir) / o.tag;
  prepare(g, o, job->partial, job->final_dir);
  const std::vector<zero::ShardState> states = engine_.shard_states();
  json entries;
  job->meta = describe(engine_, states, entries, job->expected);
  const zero::Engine::Counters c = engine_.counters();
  job->meta["counters"]["optimizer_steps"] = c.optimizer_steps;
  if (c.loss_scaler)
    job->meta["counters"]["loss_scaler"] = {{"scale", c.loss_scaler->scale},
                                            {"cur_hysteresis", c.loss_scaler->cur_hysteresis},
                                            {"last_overflow_iter", c.loss_scaler->last_overflow_iter},
                                            {"cur_iter", c.loss_scaler->cur_iter},
                                            {"skipped_steps", c.loss_scaler->skipped_steps}};
  job->meta["tag"] = o.tag;
  job->meta["extra"] = o.extra.is_object() ? o.extra : json::object();
  job->meta["step"] = job->meta["extra"].value("step", c.optimizer_steps);
  const std::string shard = (job->partial / detail::shard_file_name(g.rank())).string();
  const zero::Plan& plan = engine_.plan();
  if (!async) {
    try {
      detail::FileWriter w(shard, job->expected);
      for_each_shard_piece(states, plan, g.rank(), [&](const void* p, size_t n) { w.write(p, n); });
      job->finish(w);
    } catch (const std::exception& ex) {
      job->error = ex.what();
    }
    job_ = std::move(job);
    return commit();
  }
  // Note [background save]: the snapshot is the only part training waits for.
  std::string err;
  try {
    const size_t whole = (job->expected + 4095) / 4096 * 4096;
    if (staging_capacity_ < whole) {
      staging_capacity_ = 0;
      staging_.reset(static_cast<char*>(std::aligned_alloc(4096, whole)));
      ZT_CHECK_AS(ErrorKind::checkpoint, staging_ != nullptr, "[ckpt] cannot allocate the checkpoint snapshot of ",
                  whole, " bytes (checkpoint.async=false saves without one)");
      std::memset(staging_.get(), 0, whole);  // the tail past the file's end is written as whole blocks
      staging_capacity_ = whole;
    }
    staging_bytes_ = job->expected;
    size_t at = 0;
    for_each_shard_piece(states, plan, g.rank(), [&](const void* p, size_t n) {
      std::memcpy(staging_.get() + at, p, n);
      at += n;
    });
  } catch (const std::exception& ex) {
    err = ex.what();
  }
  Job* j = job.get();
  try {
    detail::agree(g, err, "snapshotting the shards for " + job->partial.string());
    try {
      j->writer = std::thread([j, shard, this] {
        try {
          detail::FileWriter w(shard, j->expected, /*direct=*/true);
          w.write_aligned(staging_.get(), j->expected);
          j->finish(w);
        } catch (const std::exception& ex) {
          j->error = ex.what();
        }
        j->written = true;
      });
    } catch (const std::exception& ex) {  // no thread to write with: every rank hears of it
      err = std::string("[ckpt] cannot start the checkpoint writer: ") + ex.what();
    }
    detail::agree(g, err, "starting the write of " + job->partial.string());
  } catch (...) {
    if (j->writer.joinable()) j->writer.join();
    if (g.rank() == 0) {
      std::error_code ec;
      fs::remove_all(job->partial, ec);
    }
    throw;
  }
  job_ = std::move(job);
  return "";
}

std::string Saver::poll() {
  if (!job_) return "";
  const double written = engine_.group()->all_reduce_scalar(job_->written ? 1.0 : 0.0,
                                                            comm::CollOptions("checkpoint write poll"));
  return written == double(engine_.group()->size()) ? commit() : "";
}

std::string Saver::wait() { return job_ ? commit() : ""; }

// Every rank's file written (or failed): checksums gathered, rank 0 writes metadata.json and
// renames; a failure anywhere is one agreed error, and no .partial folder stays behind.
std::string Saver::commit() {
  std::unique_ptr<Job> job = std::move(job_);
  if (job->writer.joinable()) job->writer.join();
  comm::Group& g = *engine_.group();
  const fs::path dir(job->opts.dir);
  try {
    detail::agree(g, job->error, "writing shard files");
    Tensor mine = Tensor::zeros({2}, DType::i64);
    mine.data<int64_t>()[0] = int64_t(job->sum);
    mine.data<int64_t>()[1] = int64_t(job->bytes);
    Tensor all = Tensor::zeros({2 * int64_t(g.size())}, DType::i64);
    g.all_gather(mine, all, comm::CollOptions("checkpoint checksums"));
    std::string err;
    if (g.rank() == 0) {
      try {
        json& meta = job->meta;
        json shards = json::array();
        for (int r = 0; r < g.size(); ++r)
          shards.push_back({{"file", detail::shard_file_name(r)},
                            {"xxh64", detail::hex64(uint64_t(all.data<int64_t>()[2 * r]))},
                            {"bytes", all.data<int64_t>()[2 * r + 1]}});
        meta["shards"] = shards;
        meta["metadata_xxh64"] = metadata_checksum(meta);  // last: Note [metadata checksum]
        detail::write_file_durable((job->partial / "metadata.json").string(), meta.dump(1) + "\n");
        detail::fsync_dir(job->partial.string());
        // An earlier folder of the same tag is replaced only once the new one is complete.
        const fs::path old = dir / (job->opts.tag + ".partial-old");
        fs::remove_all(old);
        if (fs::exists(job->final_dir)) fs::rename(job->final_dir, old);
        fs::rename(job->partial, job->final_dir);
        detail::fsync_dir(dir.string());
        fs::remove_all(old);
        detail::write_file_durable((dir / "latest").string(), job->opts.tag + "\n");
        detail::fsync_dir(dir.string());
        prune(dir, job->opts.tag, job->opts.keep_last);
      } catch (const std::exception& ex) {
        err = std::string(ex.what());
        if (err.rfind("[ckpt]", 0) != 0) err = "[ckpt] cannot commit " + job->final_dir.string() + ": " + err;
      }
    }
    detail::agree(g, err, "committing " + job->final_dir.string());
    if (on_commit_) on_commit_(job->final_dir.string());
  } catch (...) {
    if (g.rank() == 0) {
      std::error_code ec;
      fs::remove_all(job->partial, ec);
    }
    throw;
  }
  return job->final_dir.string();
}

std::string save_checkpoint(zero::Engine& e, const SaveOptions& o) { return Saver(e).save(o, false); }

std::string resolve_checkpoint(const std::string& dir, const std::string& which) {
  if (which == "latest") {
    const fs::path p = fs::path(dir) / "latest";
    std::error_code ec;
    ZT_CHECK_AS(ErrorKind::checkpoint, fs::exists(fs::symlink_status(p, ec)), "[ckpt] ", p.string(),
                " does not exist: no checkpoint to resume from");
    std::string tag = read_small_file(p.string(), 4096);
    if (!tag.empty() && tag.back() == '\n') tag.pop_back();
    ZT_CHECK_AS(ErrorKind::checkpoint, !tag.empty(), "[ckpt] ", p.string(), " is empty");
    check_tag(tag, p.string() + " names");
    return (fs::path(dir) / tag).string();
  }
  if (!dir.empty() && fs::is_directory(fs::path(dir) / which)) return (fs::path(dir) / which).string();
  ZT_CHECK_AS(ErrorKind::checkpoint, fs::is_directory(which), "[ckpt] no checkpoint '", which, "' (neither a tag in '",
              dir, "' nor a folder)");
  return which;
}

void verify_checkpoint(const std::string& path) {
  const json m = read_metadata(path);
  for (const auto& s : m["shards"]) {
    const std::string file = (fs::path(path) / s["file"].get<std::string>()).string();
    uint64_t bytes = 0;
    const uint64_t sum = detail::file_checksum(file, &bytes);
    ZT_CHECK_AS(ErrorKind::checkpoint, bytes == s["bytes"].get<uint64_t>(), "[ckpt] ", file, " has ", bytes,
                " bytes; metadata.json says ", s["bytes"].get<uint64_t>());
    ZT_CHECK_AS(ErrorKind::checkpoint, detail::hex64(sum) == s["xxh64"].get<std::string>(), "[ckpt] ", file,
                " is corrupt: checksum ", detail::hex64(sum), ", metadata.json says ", s["xxh64"].get<std::string>());
  }
}

std::vector<std::string> list_checkpoints(const std::string& dir) {
  std::vector<std::pair<int64_t, std::string>> found;
  std::error_code ec;
  for (const auto& d : fs::directory_iterator(dir, ec)) {
    if (!d.is_directory() || !fs::exists(d.path() / "metadata.json")) continue;
    const std::string name = d.path().filename().string();
    if (name.find(".partial") != std::string::npos) continue;
    int64_t step = 0;
    try {
      step = read_metadata(d.path().string()).value("step", int64_t(0));
    } catch (const Error&) {
      continue;  // not ours to list
    }
    found.emplace_back(step, name);
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> out;
  for (auto& [s, n] : found) out.push_back(n);
  return out;
}

}  // namespace zt::ckpt
