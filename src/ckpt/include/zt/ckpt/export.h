#pragma once
// Consolidated weights in and out of checkpoints, in safetensors (the format Hugging Face
// tools load): export streams a checkpoint's parameters into one file without ever holding
// the model; import starts training from such a file, each rank reading only what it owns.
#include <cstdint>
#include <string>
#include <vector>

#include "zt/core/dtype.h"
#include "zt/zero/engine.h"

namespace zt::ckpt {

struct ExportOptions {
  DType dtype = DType::f32;       // output dtype of every tensor (f32, bf16 or f16)
  int64_t chunk_elems = 1 << 22;  // elements converted per read: memory is O(this), not O(model)
  std::string tensor = "param";   // which saved state to export ("master": the fp32 master copy)
};

struct ExportStats {
  int64_t tensors = 0;
  uint64_t file_bytes = 0;            // the whole safetensors file
  uint64_t largest_buffer_bytes = 0;  // the checkpoint's largest flat buffer, in the output dtype
};

// Writes the consolidated parameters of the checkpoint folder `checkpoint` to `out` (model
// order, the model's names, shapes), parameter by parameter in chunks of chunk_elems. Written
// under a unique temporary name, fsynced, renamed. Not collective: one process does it.
ExportStats export_safetensors(const std::string& checkpoint, const std::string& out, const ExportOptions& opts = {});

struct ImportReport {
  int64_t tensors = 0;              // parameters initialised from the file
  std::vector<std::string> unused;  // tensors of the file the model has no parameter for
};

// Collective over the engine's group: every trainable parameter is initialised from the
// tensor of the same name in the safetensors file (any floating dtype, converted), each rank
// reading only the bytes of the ranges it owns; fp32 master copies get the file's values,
// optimizer states and the step count start at zero; then the full parameters are refreshed.
// A missing tensor or a shape mismatch is ErrorKind::checkpoint naming the parameter (and
// both shapes), raised on every rank.
ImportReport import_safetensors(zero::Engine& engine, const std::string& path);

}  // namespace zt::ckpt
