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
#include <filesystem>

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

// This rank's canonical slice of every shard-state tensor, in `entries` order; a swapped tensor
// streams through one chunk (Note [optimizer swap]).
void write_shard(const std::string& path, const std::vector<zero::ShardState>& states, const zero::Plan& plan, int rank,
                 uint64_t expected, uint64_t& bytes, uint64_t& sum) {
  detail::FileWriter w(path, expected);
  std::vector<char> chunk;
  for (auto& s : states) {
    const zero::Range c = zero::shard_range(plan.buffers[s.buffer].padded, plan.world, rank);
    for (auto& t : s.tensors) {
      if (!t.streamed() && t.tensor.device().is_cpu()) {  // else in chunks (a device's: copied down)
        const Tensor slice = t.tensor.slice(0, c.begin - s.offset, c.end - s.offset);
        w.write(slice.raw_data(), slice.nbytes());
        continue;
      }
      const size_t elem = dtype_size(t.dtype);
      for (int64_t e = c.begin; e < c.end; e += kChunkElems) {
        const int64_t n = std::min(kChunkElems, c.end - e);
        chunk.resize(size_t(n) * elem);
        t.read(e - s.offset, n, chunk.data());
        w.write(chunk.data(), chunk.size());
      }
    }
  }
  w.finish();
  bytes = w.bytes();
  sum = w.checksum();
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

}  // namespace

namespace {
// The shards, the metadata and the commit of a save whose .partial folder is ready.
std::string write_and_commit(zero::Engine& e, const SaveOptions& o, const fs::path& partial, const fs::path& final_dir);
}  // namespace

std::string save_checkpoint(zero::Engine& e, const SaveOptions& o) {
  comm::Group& g = *e.group();
  const fs::path dir(o.dir), partial = dir / (o.tag + ".partial"), final_dir = dir / o.tag;
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
  // From here a failed save (a full disk) leaves no .partial folder behind.
  try {
    return write_and_commit(e, o, partial, final_dir);
  } catch (...) {
    if (g.rank() == 0) {
      std::error_code ec;
      fs::remove_all(partial, ec);
    }
    throw;
  }
}

namespace {

std::string write_and_commit(zero::Engine& e, const SaveOptions& o, const fs::path& partial, const fs::path& final_dir) {
  comm::Group& g = *e.group();
  const fs::path dir(o.dir);
  std::string err;

  const std::vector<zero::ShardState> states = e.shard_states();
  json entries;
  uint64_t expected = 0, bytes = 0, sum = 0;
  json meta = describe(e, states, entries, expected);
  const std::string shard = (partial / detail::shard_file_name(g.rank())).string();
  try {
    write_shard(shard, states, e.plan(), g.rank(), expected, bytes, sum);
    if (o.after_shard_written) o.after_shard_written();
  } catch (const std::exception& ex) {
    err = ex.what();
  }
  detail::agree(g, err, "writing shard files");

  Tensor mine = Tensor::zeros({2}, DType::i64);
  mine.data<int64_t>()[0] = int64_t(sum);
  mine.data<int64_t>()[1] = int64_t(bytes);
  Tensor all = Tensor::zeros({2 * int64_t(g.size())}, DType::i64);
  g.all_gather(mine, all, comm::CollOptions("checkpoint checksums"));

  if (g.rank() == 0) {
    try {
      json shards = json::array();
      for (int r = 0; r < g.size(); ++r)
        shards.push_back({{"file", detail::shard_file_name(r)},
                          {"xxh64", detail::hex64(uint64_t(all.data<int64_t>()[2 * r]))},
                          {"bytes", all.data<int64_t>()[2 * r + 1]}});
      meta["shards"] = shards;
      const zero::Engine::Counters c = e.counters();
      meta["counters"]["optimizer_steps"] = c.optimizer_steps;
      if (c.loss_scaler)
        meta["counters"]["loss_scaler"] = {{"scale", c.loss_scaler->scale},
                                           {"cur_hysteresis", c.loss_scaler->cur_hysteresis},
                                           {"last_overflow_iter", c.loss_scaler->last_overflow_iter},
                                           {"cur_iter", c.loss_scaler->cur_iter},
                                           {"skipped_steps", c.loss_scaler->skipped_steps}};
      meta["tag"] = o.tag;
      meta["extra"] = o.extra.is_object() ? o.extra : json::object();
      meta["step"] = meta["extra"].value("step", c.optimizer_steps);
      meta["metadata_xxh64"] = metadata_checksum(meta);  // last: Note [metadata checksum]
      detail::write_file_durable((partial / "metadata.json").string(), meta.dump(1) + "\n");
      detail::fsync_dir(partial.string());
      // An earlier folder of the same tag is replaced only once the new one is complete.
      const fs::path old = dir / (o.tag + ".partial-old");
      fs::remove_all(old);
      if (fs::exists(final_dir)) fs::rename(final_dir, old);
      fs::rename(partial, final_dir);
      detail::fsync_dir(dir.string());
      fs::remove_all(old);
      detail::write_file_durable((dir / "latest").string(), o.tag + "\n");
      detail::fsync_dir(dir.string());
      prune(dir, o.tag, o.keep_last);
    } catch (const std::exception& ex) {
      err = std::string(ex.what());
      if (err.rfind("[ckpt]", 0) != 0) err = "[ckpt] cannot commit " + final_dir.string() + ": " + err;
    }
  }
  detail::agree(g, err, "committing " + final_dir.string());
  return final_dir.string();
}

}  // namespace

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
