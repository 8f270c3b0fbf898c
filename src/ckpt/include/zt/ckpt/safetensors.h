#pragma once
// safetensors files (8-byte little-endian header length, JSON header, raw little-endian data),
// the format Hugging Face uses for weights. Writes go to a unique temporary name, are fsynced,
// then renamed (Note [atomic files]), so an existing file is never left half-written.
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "zt/core/atomic_file.h"
#include "zt/core/tensor.h"

namespace zt::ckpt {

void save_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata = {});
// The same bytes into `out`, left uncommitted: for a caller that commits several files together.
void write_safetensors(AtomicFile& out, const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

struct LoadedTensors {
  std::vector<std::pair<std::string, Tensor>> tensors;  // in file order of offsets
  std::map<std::string, std::string> metadata;
  const Tensor* find(const std::string& name) const;
};
// Errors name the file and what is wrong (bad header length, offsets past the end, ...).
LoadedTensors load_safetensors(const std::string& path);

}  // namespace zt::ckpt
