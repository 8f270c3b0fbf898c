// Hugging Face folders out of checkpoints, and into an engine (Note [HF mapping] in hf_folder.h):
// export writes each piece of each parameter as the folder's tensor, one piece in memory at a time;
// import fills each rank's shards from the folder's ranges it owns.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>

#include <nlohmann/json.hpp>

#include "checkpoint_detail.h"
#include "checkpoint_reader.h"
#include "zt/ckpt/hf_folder.h"
#include "zt/ckpt/safetensors.h"
#include "zt/core/atomic_file.h"
#include "zt/core/error.h"
#include "zt/zero/engine.h"

namespace zt::ckpt {

namespace fs = std::filesystem;

namespace {

struct OutTensor {
  TensorEntry entry;
  size_t param = 0;  // the checkpoint's index
  const HfParam* mapped = nullptr;
  const HfPiece* piece = nullptr;
  uint64_t bytes = 0;
};

// Rows [rb, re) of checkpoint parameter i, as the folder stores them, in dtype `dt`.
Tensor piece_tensor(detail::CheckpointReader& r, const std::string& state, const OutTensor& t, DType dt) {
  const HfParam& p = *t.mapped;
  int64_t C = 1;
  for (size_t d = 1; d < p.shape.size(); ++d) C *= p.shape[d];
  const int64_t rows = t.piece->row_end - t.piece->row_begin, n = rows * C;
  const DType saved = r.tensor_dtype(state);
  Tensor raw = Tensor::empty({n}, saved, MemTag::workspace);
  r.read_param_elements(state, t.param, t.piece->row_begin * C, t.piece->row_end * C, raw.raw_data());
  Tensor f = Tensor::empty({n}, DType::f32, MemTag::workspace);
  detail::widen_f32(raw.raw_data(), saved, n, f.data<float>());
  if (t.piece->transpose) {  // [rows, C] -> [C, rows]
    Tensor tr = Tensor::empty({n}, DType::f32, MemTag::workspace);
    const float* a = f.data<float>();
    float* b = tr.data<float>();
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < C; ++j) b[j * rows + i] = a[i * C + j];
    f = tr;
  }
  Tensor out = Tensor::empty(t.entry.shape, dt, MemTag::workspace);
  out.copy_(f.reshape(t.entry.shape));
  return out;
}

}  // namespace

std::vector<std::string> export_hf_folder(const std::string& checkpoint, const std::string& out_dir,
                                          const HfMapping& m, const HfExportOptions& o) {
  ZT_CHECK_AS(ErrorKind::invalid_argument, is_floating(o.dtype), "[export] dtype must be f32, bf16 or f16");
  detail::CheckpointReader r(checkpoint);
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < r.num_params(); ++i) index[r.param_name(i)] = i;
  std::vector<OutTensor> out;
  for (const HfParam& p : m.params) {
    auto it = index.find(p.param);
    ZT_CHECK_AS(ErrorKind::checkpoint, it != index.end() && r.param_shape(it->second) == p.shape, "[export] ",
                checkpoint, ": parameter '", p.param, "' ",
                it == index.end() ? "is not in the checkpoint" : "has another shape in the checkpoint",
                " (its config and its parameters disagree)");
    for (const HfPiece& k : p.pieces) {
      Shape s = p.shape;
      if (!s.empty()) s[0] = k.row_end - k.row_begin;
      if (k.transpose) std::reverse(s.begin(), s.end());
      const uint64_t bytes = uint64_t(shape_numel(s)) * dtype_size(o.dtype);
      out.push_back({{k.tensor, o.dtype, s}, it->second, &p, &k, bytes});
    }
  }
  // Shards in order, each up to max_shard_bytes (a larger tensor alone), as transformers cuts them.
  std::vector<std::vector<const OutTensor*>> shards(1);
  uint64_t in_shard = 0, total = 0;
  for (const OutTensor& t : out) {
    if (!shards.back().empty() && in_shard + t.bytes > o.max_shard_bytes) {
      shards.emplace_back();
      in_shard = 0;
    }
    shards.back().push_back(&t);
    in_shard += t.bytes;
    total += t.bytes;
  }
  fs::create_directories(out_dir);
  std::vector<std::string> files;
  nlohmann::json weight_map = nlohmann::json::object();
  for (size_t s = 0; s < shards.size(); ++s) {
    char name[64];
    std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", s + 1, shards.size());
    const std::string file = shards.size() == 1 ? "model.safetensors" : name;
    std::vector<TensorEntry> entries;
    for (const OutTensor* t : shards[s]) {
      entries.push_back(t->entry);
      weight_map[t->entry.name] = file;
    }
    AtomicFile f((fs::path(out_dir) / file).string(), ErrorKind::checkpoint, "[export]");
    SafetensorsWriter w(f, entries, {{"format", "pt"}});
    for (const OutTensor* t : shards[s]) w.write(t->entry.name, piece_tensor(r, o.tensor, *t, o.dtype));
    w.finish();
    f.commit();
    files.push_back(f.path());
  }
  const std::string index_path = (fs::path(out_dir) / "model.safetensors.index.json").string();
  std::error_code ec;
  if (shards.size() > 1) {
    const nlohmann::json j = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
    write_file_atomic(index_path, j.dump(2) + "\n", ErrorKind::checkpoint, "[export]");
    files.push_back(index_path);
  } else {
    fs::remove(index_path, ec);  // a stale index would shadow model.safetensors
  }
  // An earlier export's weights that this one did not write: transformers reads model.safetensors
  // before an index, and a stale shard would sit beside the new ones.
  for (const auto& entry : fs::directory_iterator(out_dir, ec)) {
    const std::string n = entry.path().filename().string();
    const bool weights = n == "model.safetensors" || (n.rfind("model-", 0) == 0 && n.find("-of-") != std::string::npos &&
                                                      n.size() > 12 && n.substr(n.size() - 12) == ".safetensors");
    if (weights && std::find(files.begin(), files.end(), entry.path().string()) == files.end())
      fs::remove(entry.path(), ec);
  }
  sync_dir(out_dir, ErrorKind::checkpoint, "[export]");
  return files;
}

int64_t import_hf_folder(zero::Engine& e, const HfFolder& folder, const HfMapping& m, const std::vector<bool>& usable) {
  std::string err;
  int64_t loaded = 0;
  try {
    std::map<std::string, size_t> mapped;
    for (size_t i = 0; i < m.params.size(); ++i) mapped[m.params[i].param] = i;
    const auto& names = e.param_names();
    std::vector<const HfParam*> source(names.size(), nullptr);  // per engine parameter, when it is read
    for (size_t i = 0; i < names.size(); ++i) {
      auto it = mapped.find(names[i]);
      if (it != mapped.end() && usable[it->second]) source[i] = &m.params[it->second], ++loaded;
    }
    constexpr int64_t kChunk = int64_t(1) << 20;
    std::vector<float> buf;
    const zero::Plan& plan = e.plan();
    for (auto& s : e.shard_states()) {
      std::vector<const zero::ShardTensor*> targets;  // the working copy and, in 16-bit runs, the fp32 master
      for (auto& t : s.tensors) {
        if (t.name == "param" || t.name == "master")
          targets.push_back(&t);
        else
          t.zero();  // optimizer states start fresh
      }
      const zero::Range mine{s.offset, s.offset + s.numel};
      for (auto& slot : plan.buffers[s.buffer].params) {
        const zero::Range r = zero::intersect(mine, {slot.offset, slot.offset + slot.numel});
        if (r.empty() || !source[slot.index]) continue;
        for (int64_t b = r.begin; b < r.end; b += kChunk) {
          const int64_t n = std::min(kChunk, r.end - b);
          buf.resize(size_t(n));
          folder.read(*source[slot.index], b - slot.offset, n, buf.data());
          Tensor f = Tensor::from_vector(buf, {n});
          for (const zero::ShardTensor* dst : targets) {
            Tensor conv = Tensor::empty({n}, dst->dtype, MemTag::workspace);
            conv.copy_(f);
            dst->write(b - mine.begin, n, conv.raw_data());
          }
        }
      }
    }
    e.load_counters(zero::Engine::Counters{});
  } catch (const std::exception& ex) {
    err = ex.what();
  }
  detail::agree(*e.group(), err, "importing " + folder.dir());
  e.refresh_params();
  return loaded;
}

}  // namespace zt::ckpt
