#pragma once
// Hugging Face model folders: config.json beside model.safetensors, or the shards
// model-0000k-of-0000n.safetensors that model.safetensors.index.json lists. A model's parameters
// are read from such a folder, and a checkpoint's written into one, through a mapping (Note [HF
// mapping]); which names and layouts a family uses is its model entry's (apps), not ckpt's.
//
// Note [HF mapping]: each parameter is the concatenation, along its first dimension, of pieces,
// each one tensor of the folder (BERT's query/key/value into one qkv, Llama's gate/up), each
// stored as the parameter's rows or transposed (GPT-2's Conv1D keeps weights [in, out]). A tied
// tensor (an output head equal to the embedding) may be in the folder: then it must hold the same
// values; it is never written. Reading and writing use the one mapping, so a folder written and
// read back gives the same parameters bit for bit.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "zt/core/dtype.h"
#include "zt/core/tensor.h"

namespace zt::zero {
class Engine;
}

namespace zt::ckpt {

struct HfPiece {
  std::string tensor;                  // its name in the folder
  int64_t row_begin = 0, row_end = 0;  // the parameter's rows it holds
  bool transpose = false;              // stored [columns, rows] (a 2-D parameter's piece)
};
struct HfParam {
  std::string param;  // the model's name
  Shape shape;
  std::vector<HfPiece> pieces;  // consecutive rows, covering the first dimension
};
struct HfTied {
  std::string tensor, same_as;  // folder names: `tensor`, where present, equals `same_as`
};
struct HfMapping {
  std::vector<HfParam> params;  // model order
  std::vector<HfTied> tied;
  std::vector<std::string> buffers;  // folder tensors that are no parameter (GPT-2's attn.bias mask): skipped
};
// A parameter as one piece of the same name (the common case).
HfParam hf_same(const std::string& name, const Shape& shape);
// A parameter of `shape` split along rows into `parts` (name, rows) in order.
HfParam hf_rows(const std::string& name, const Shape& shape,
                const std::vector<std::pair<std::string, int64_t>>& parts);

// A folder holding config.json.
bool is_hf_folder(const std::string& path);

// What a mapping finds in a folder (Note [HF mapping]).
struct HfMatch {
  std::vector<bool> usable;  // per mapped parameter: every piece present, of its shape
  std::vector<std::string> missing, unused, misshapen;
  std::vector<std::string> left_out;  // the parameters not usable
  bool complete() const { return missing.empty() && unused.empty() && misshapen.empty(); }
  // "missing: a, b; unused: c; misshapen: d [2, 3] in the folder, [3, 2] expected"
  std::string problems() const;
};

class HfFolder {
 public:
  // Reads every safetensors header of the folder (the index's shards, or model.safetensors).
  explicit HfFolder(const std::string& dir);
  ~HfFolder();
  HfFolder(const HfFolder&) = delete;
  HfFolder& operator=(const HfFolder&) = delete;

  const std::string& dir() const { return dir_; }
  std::vector<std::string> tensor_names() const;
  // Checks `m` against the folder: shapes of the pieces, what is missing or unused, tied values.
  HfMatch match(const HfMapping& m) const;
  // Elements [begin, begin + n) of mapped parameter `p` (its own layout), widened to f32 exactly.
  void read(const HfParam& p, int64_t begin, int64_t n, float* dst) const;
  Tensor read_param(const HfParam& p) const;  // the whole parameter, f32

 private:
  struct Impl;
  std::string dir_;
  std::unique_ptr<Impl> impl_;
};

// Writes the parameters of checkpoint folder `checkpoint` to `out_dir` through `m` as
// model.safetensors, or, past max_shard_bytes, model-0000k-of-0000n.safetensors with
// model.safetensors.index.json: one piece at a time (memory: one parameter at most). Returns the
// files written.
struct HfExportOptions {
  DType dtype = DType::f32;
  uint64_t max_shard_bytes = 5'000'000'000;  // transformers' default: 5GB
  std::string tensor = "param";
};
std::vector<std::string> export_hf_folder(const std::string& checkpoint, const std::string& out_dir,
                                          const HfMapping& m, const HfExportOptions& o = {});

// Collective over the engine's group, as import_safetensors: the mapped parameters for which
// usable[i] is true take the folder's values (each rank reads the ranges it owns), the rest keep
// theirs; optimizer states and the step count start at zero.
int64_t import_hf_folder(zero::Engine& e, const HfFolder& f, const HfMapping& m, const std::vector<bool>& usable);

}  // namespace zt::ckpt
