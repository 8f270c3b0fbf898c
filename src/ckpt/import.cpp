// Import: a safetensors file becomes the starting point of training. Every rank checks every
// parameter against the file's header (so a mismatch is the same error everywhere), then reads
// only the byte ranges of the elements it owns and converts them into its shard state.
#include <algorithm>
#include <map>

#include "checkpoint_detail.h"
#include "file_io.h"
#include "zt/ckpt/export.h"
#include "zt/ckpt/safetensors.h"
#include "zt/core/error.h"

namespace zt::ckpt {

namespace {

constexpr int64_t kChunkElems = int64_t(1) << 20;

// The file's tensor for each trainable parameter, in model order; the rest of the file unused.
std::vector<const SafetensorsEntry*> match(const SafetensorsHeader& file, zero::Engine& e, ImportReport& rep) {
  std::map<std::string, const SafetensorsEntry*> by_name;
  for (const auto& t : file.tensors) by_name[t.name] = &t;
  std::vector<const SafetensorsEntry*> out;
  const auto& names = e.param_names();
  for (size_t i = 0; i < names.size(); ++i) {
    auto it = by_name.find(names[i]);
    ZT_CHECK_AS(ErrorKind::checkpoint, it != by_name.end(), "[import] ", file.source, " has no tensor '", names[i],
                "' (a parameter of the model)");
    const SafetensorsEntry& t = *it->second;
    const Shape& want = e.params()[i].shape();
    ZT_CHECK_AS(ErrorKind::checkpoint, t.shape == want, "[import] ", file.source, ": parameter '", names[i],
                "' has shape ", shape_str(t.shape), " in the file and ", shape_str(want), " in the model");
    ZT_CHECK_AS(ErrorKind::checkpoint, is_floating(t.dtype), "[import] ", file.source, ": parameter '", names[i],
                "' is ", dtype_name(t.dtype), " in the file, not a floating dtype");
    out.push_back(&t);
  }
  for (const auto& t : file.tensors)
    if (std::find(names.begin(), names.end(), t.name) == names.end()) rep.unused.push_back(t.name);
  rep.tensors = int64_t(names.size());
  return out;
}

void import_states(zero::Engine& e, const std::string& path, ImportReport& rep) {
  const SafetensorsHeader header = read_safetensors_header(path);
  const std::vector<const SafetensorsEntry*> file = match(header, e, rep);
  detail::FileReader f(path);
  const zero::Plan& plan = e.plan();
  for (auto& s : e.shard_states()) {
    std::vector<const zero::ShardTensor*> targets;  // the working copy and, in 16-bit runs, the fp32 master
    for (auto& t : s.tensors) {
      t.zero();  // optimizer states start fresh; padding stays zero
      if (t.name == "param" || t.name == "master") targets.push_back(&t);
    }
    const zero::Range mine{s.offset, s.offset + s.numel};
    for (auto& slot : plan.buffers[s.buffer].params) {
      const zero::Range r = zero::intersect(mine, {slot.offset, slot.offset + slot.numel});
      if (r.empty()) continue;
      const SafetensorsEntry& t = *file[slot.index];
      // A chunk at a time: held memory stays a chunk's, whatever the parameter's size (issue 31).
      for (int64_t b = r.begin; b < r.end; b += kChunkElems) {
        const int64_t n = std::min(kChunkElems, r.end - b);
        Tensor raw = Tensor::empty({n}, t.dtype, MemTag::workspace);
        f.read_at(raw.raw_data(), raw.nbytes(), t.begin + uint64_t(b - slot.offset) * dtype_size(t.dtype));
        for (const zero::ShardTensor* dst : targets) {
          Tensor conv = Tensor::empty({n}, dst->dtype, MemTag::workspace);
          conv.copy_(raw);  // the file's dtype to the shard's
          dst->write(b - mine.begin, n, conv.raw_data());
        }
      }
    }
  }
  e.load_counters(zero::Engine::Counters{});
}

}  // namespace

ImportReport import_safetensors(zero::Engine& e, const std::string& path) {
  ImportReport rep;
  std::string err;
  try {
    import_states(e, path, rep);
  } catch (const std::exception& ex) {
    err = ex.what();
  }
  detail::agree(*e.group(), err, "importing " + path);
  e.refresh_params();
  return rep;
}

}  // namespace zt::ckpt
