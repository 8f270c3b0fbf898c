#pragma once
// The header of a safetensors file without its data (private to zt_ckpt): what streaming
// export writes first and what import reads to fetch each rank's ranges by name.
// Note [safetensors index]: load_safetensors (safetensors.cpp) reads whole files; import needs
// only offsets, so this parses the header alone and checks what a ranged read relies on
// (length, dtype, shape x dtype = bytes, offsets inside the data).
#include <cstdint>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "zt/core/tensor.h"

namespace zt::ckpt::detail {

const char* safetensors_dtype(DType t);  // "F32", "BF16", ...

struct IndexedTensor {
  DType dtype = DType::f32;
  Shape shape;
  uint64_t begin = 0, end = 0;  // absolute byte offsets in the file
};

struct SafetensorsIndex {
  std::string path;
  std::map<std::string, IndexedTensor> tensors;
};

SafetensorsIndex read_safetensors_index(const std::string& path);

// The 8-byte length and the JSON header, padded with spaces so the data is 8-byte aligned.
std::string safetensors_header(const nlohmann::json& header);

}  // namespace zt::ckpt::detail
