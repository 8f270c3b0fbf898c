// Loading a checkpoint into an engine of any world size and stage: every element this rank
// owns is read through its parameter (detail::CheckpointReader, Note [checkpoint format]).
#include "checkpoint_detail.h"
#include "checkpoint_reader.h"
#include "zt/ckpt/checkpoint.h"
#include "zt/core/error.h"

#include <algorithm>
#include <vector>

namespace zt::ckpt {

using nlohmann::json;

namespace {

constexpr int64_t kChunkElems = int64_t(1) << 20;

// Same model, precision and optimizer, or an error naming the first difference.
void check_compatible(const detail::CheckpointReader& r, zero::Engine& e) {
  const std::string& path = r.path();
  const json& m = r.metadata();
  const auto& names = e.param_names();
  for (size_t i = 0; i < names.size(); ++i) {
    ZT_CHECK_AS(ErrorKind::checkpoint, i < r.num_params(), "[ckpt] ", path, " has ", r.num_params(),
                " parameters; the model has ", names.size(), " (first missing: ", names[i], ")");
    const Shape& shape = r.param_shape(i);
    const Shape& want = e.params()[i].shape();
    ZT_CHECK_AS(ErrorKind::checkpoint, r.param_name(i) == names[i], "[ckpt] ", path, ": parameter ", i, " is '",
                r.param_name(i), "' in the checkpoint and '", names[i], "' in the model (a different model)");
    ZT_CHECK_AS(ErrorKind::checkpoint, shape == want, "[ckpt] ", path, ": parameter '", names[i], "' has shape ",
                shape_str(shape), " in the checkpoint and ", shape_str(want), " in the model");
  }
  ZT_CHECK_AS(ErrorKind::checkpoint, r.num_params() == names.size(), "[ckpt] ", path, " has ", r.num_params(),
              " parameters; the model has ", names.size(), " (first extra: ", r.param_name(names.size()), ")");
  const std::string dt = dtype_name(e.policy().param_dtype);
  ZT_CHECK_AS(ErrorKind::checkpoint, m["dtype"] == dt, "[ckpt] ", path, " was saved in ", m["dtype"].get<std::string>(),
              "; this run trains in ", dt, " (set bf16/fp16 as when it was saved)");
  ZT_CHECK_AS(ErrorKind::checkpoint, m.value("optimizer", "") == e.options().optimizer.type, "[ckpt] ", path, " holds ",
              m.value("optimizer", ""), " state; this run uses ", e.options().optimizer.type);
}

void load_states(zero::Engine& e, detail::CheckpointReader& r) {
  check_compatible(r, e);
  const zero::Plan& plan = e.plan();
  for (auto& s : e.shard_states()) {
    const zero::Range mine{s.offset, s.offset + s.numel};
    for (auto& t : s.tensors) {
      ZT_CHECK_AS(ErrorKind::checkpoint, r.tensor_dtype(t.name) == t.dtype, "[ckpt] saved '", t.name, "' is ",
                  dtype_name(r.tensor_dtype(t.name)), ", not the ", dtype_name(t.dtype), " this run holds");
      t.zero();  // padding stays zero
      const size_t elem = dtype_size(t.dtype);
      std::vector<char> chunk;  // a swapped tensor's elements pass through it (Note [optimizer swap])
      for (auto& slot : plan.buffers[s.buffer].params) {
        const zero::Range got = zero::intersect(mine, {slot.offset, slot.offset + slot.numel});
        for (int64_t e = got.begin; e < got.end; e += kChunkElems) {
          const int64_t n = std::min(kChunkElems, got.end - e);
          if (!t.streamed() && t.tensor.device().is_cpu()) {  // else in chunks (a device's: copied up)
            r.read_param_elements(t.name, slot.index, e - slot.offset, e - slot.offset + n,
                                  static_cast<char*>(t.tensor.raw_data()) + size_t(e - mine.begin) * elem);
            continue;
          }
          chunk.resize(size_t(n) * elem);
          r.read_param_elements(t.name, slot.index, e - slot.offset, e - slot.offset + n, chunk.data());
          t.write(e - mine.begin, n, chunk.data());
        }
      }
    }
  }
  const json& m = r.metadata();
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

json load_checkpoint(zero::Engine& e, const std::string& dir, const std::string& which, std::string* path) {
  json extra;
  std::string err, folder;
  try {
    folder = which.empty() ? dir : resolve_checkpoint(dir, which);
    detail::CheckpointReader r(folder);
    load_states(e, r);
    extra = r.metadata()["extra"];
  } catch (const std::exception& ex) {
    err = ex.what();
  }
  detail::agree(*e.group(), err, "loading " + (folder.empty() ? dir + "/" + which : folder));
  e.refresh_params();
  if (path) *path = folder;
  return extra;
}

json load_checkpoint(zero::Engine& e, const std::string& path) { return load_checkpoint(e, path, "", nullptr); }

}  // namespace zt::ckpt
