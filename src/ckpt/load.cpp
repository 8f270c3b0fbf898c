// Loading a checkpoint into an engine of any world size and stage: every element this rank
// owns is found through its parameter (Note [checkpoint format]): parameter i sits at offset o
// of saved buffer b, so its element k is at o + k, held by saving rank (o + k) / S_b.
#include <filesystem>
#include <map>
#include <memory>

#include "checkpoint_detail.h"
#include "file_io.h"
#include "zt/ckpt/checkpoint.h"
#include "zt/core/error.h"

namespace zt::ckpt {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

struct SavedLayout {
  int world = 1;
  std::vector<int64_t> padded;                      // per saved buffer
  std::vector<std::pair<size_t, int64_t>> where;    // per parameter: saved buffer, offset
  json entries;
};

// Same model, precision and optimizer, or an error naming the first difference.
SavedLayout check_compatible(const json& m, zero::Engine& e, const std::string& path) {
  const auto& names = e.param_names();
  const json& params = m["params"];
  for (size_t i = 0; i < names.size(); ++i) {
    ZT_CHECK_AS(ErrorKind::checkpoint, i < params.size(), "[ckpt] ", path, " has ", params.size(),
                " parameters; the model has ", names.size(), " (first missing: ", names[i], ")");
    const std::string saved = params[i]["name"];
    const Shape shape = params[i]["shape"].get<Shape>(), want = e.params()[i].shape();
    ZT_CHECK_AS(ErrorKind::checkpoint, saved == names[i], "[ckpt] ", path, ": parameter ", i, " is '", saved,
                "' in the checkpoint and '", names[i], "' in the model (a different model)");
    ZT_CHECK_AS(ErrorKind::checkpoint, shape == want, "[ckpt] ", path, ": parameter '", names[i], "' has shape ",
                shape_str(shape), " in the checkpoint and ", shape_str(want), " in the model");
  }
  ZT_CHECK_AS(ErrorKind::checkpoint, params.size() == names.size(), "[ckpt] ", path, " has ", params.size(),
              " parameters; the model has ", names.size(), " (first extra: ",
              params[names.size()]["name"].get<std::string>(), ")");
  const std::string dt = dtype_name(e.policy().param_dtype);
  ZT_CHECK_AS(ErrorKind::checkpoint, m["dtype"] == dt, "[ckpt] ", path, " was saved in ", m["dtype"].get<std::string>(),
              "; this run trains in ", dt, " (set bf16/fp16 as when it was saved)");
  ZT_CHECK_AS(ErrorKind::checkpoint, m.value("optimizer", "") == e.options().optimizer.type, "[ckpt] ", path,
              " holds ", m.value("optimizer", ""), " state; this run uses ", e.options().optimizer.type);
  SavedLayout l;
  l.world = m["world_size"];
  l.entries = m["entries"];
  l.where.assign(names.size(), {0, -1});
  const json& buffers = m["buffers"];
  for (size_t b = 0; b < buffers.size(); ++b) {
    l.padded.push_back(buffers[b]["padded"]);
    for (const auto& s : buffers[b]["params"]) l.where.at(s[0].get<size_t>()) = {b, s[1].get<int64_t>()};
  }
  for (size_t i = 0; i < l.where.size(); ++i)
    ZT_CHECK_AS(ErrorKind::checkpoint, l.where[i].second >= 0, "[ckpt] ", path, ": parameter '", names[i],
                "' is in no saved buffer");
  ZT_CHECK_AS(ErrorKind::checkpoint, int(m["shards"].size()) == l.world, "[ckpt] ", path, " lists ",
              m["shards"].size(), " shard files for world size ", l.world);
  return l;
}

// Opens each saving rank's file once, verifying its checksum before the first read.
class Shards {
 public:
  Shards(const std::string& path, const json& shards) : path_(path), meta_(shards) {}
  const detail::FileReader& file(int rank) {
    auto& slot = open_[rank];
    if (!slot) {
      const json& s = meta_.at(size_t(rank));
      const std::string file = (fs::path(path_) / s["file"].get<std::string>()).string();
      uint64_t bytes = 0;
      const std::string sum = detail::hex64(detail::file_checksum(file, &bytes));
      ZT_CHECK_AS(ErrorKind::checkpoint, bytes == s["bytes"].get<uint64_t>(), "[ckpt] ", file, " has ", bytes,
                  " bytes; metadata.json says ", s["bytes"].get<uint64_t>(), " (truncated?)");
      ZT_CHECK_AS(ErrorKind::checkpoint, sum == s["xxh64"].get<std::string>(), "[ckpt] ", file,
                  " is corrupt: its checksum is ", sum, ", metadata.json says ", s["xxh64"].get<std::string>());
      slot = std::make_unique<detail::FileReader>(file);
    }
    return *slot;
  }

 private:
  std::string path_;
  const json& meta_;
  std::map<int, std::unique_ptr<detail::FileReader>> open_;
};

// Copies parameter i's elements [a, z) of saved tensor `name` into dst.
void read_param_range(Shards& shards, const SavedLayout& l, const std::string& name, size_t i, int64_t a, int64_t z,
                      char* dst, size_t elem) {
  const auto [b, off] = l.where[i];
  const json& entry = l.entries.at(detail::entry_key(b, name));
  ZT_CHECK_AS(ErrorKind::checkpoint, size_t(dtype_size(dtype_from_name(entry["dtype"]))) == elem,
              "[ckpt] saved '", name, "' is ", entry["dtype"].get<std::string>(), ", not the dtype this run holds");
  const int64_t S = l.padded[b] / l.world, base = entry["offset"];
  for (int64_t p = off + a, end = off + z; p < end;) {
    const int r = int(p / S);
    const int64_t stop = std::min(end, int64_t(r + 1) * S);
    shards.file(r).read_at(dst, size_t(stop - p) * elem, uint64_t(base + (p - int64_t(r) * S) * int64_t(elem)));
    dst += size_t(stop - p) * elem;
    p = stop;
  }
}

void load_states(zero::Engine& e, const json& m, const std::string& path) {
  const SavedLayout l = check_compatible(m, e, path);
  Shards shards(path, m["shards"]);
  const zero::Plan& plan = e.plan();
  for (auto& s : e.shard_states()) {
    const zero::Range mine{s.offset, s.offset + s.numel};
    for (auto& [name, t] : s.tensors) {
      ZT_CHECK_AS(ErrorKind::checkpoint, l.entries.contains(detail::entry_key(0, name)), "[ckpt] ", path,
                  " has no '", name, "' state (saved by another optimizer or precision)");
      Tensor dst = t;
      dst.zero_();  // padding stays zero
      const size_t elem = dtype_size(dst.dtype());
      char* base = static_cast<char*>(dst.raw_data());
      for (auto& slot : plan.buffers[s.buffer].params) {
        const zero::Range r = zero::intersect(mine, {slot.offset, slot.offset + slot.numel});
        if (r.empty()) continue;
        read_param_range(shards, l, name, slot.index, r.begin - slot.offset, r.end - slot.offset,
                         base + size_t(r.begin - mine.begin) * elem, elem);
      }
    }
  }
  zero::Engine::Counters c;
  c.optimizer_steps = m["counters"].value("optimizer_steps", int64_t(0));
  if (m["counters"].contains("loss_scaler")) {
    const json& s = m["counters"]["loss_scaler"];
    c.loss_scaler = optim::LossScaler::State{s["scale"], s["cur_hysteresis"], s["last_overflow_iter"], s["cur_iter"],
                                             s["skipped_steps"]};
  }
  e.load_counters(c);
}

}  // namespace

json load_checkpoint(zero::Engine& e, const std::string& path) {
  json m;
  std::string err;
  try {
    m = read_metadata(path);
    load_states(e, m, path);
  } catch (const std::exception& ex) {
    err = ex.what();
  }
  detail::agree(*e.group(), err, "loading " + path);
  e.refresh_params();
  return m["extra"];
}

}  // namespace zt::ckpt
