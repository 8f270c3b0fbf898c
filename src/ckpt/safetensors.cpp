#include "zt/ckpt/safetensors.h"

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

namespace zt::ckpt {

namespace {
const char* st_dtype(DType t) {
  switch (t) {
    case DType::f32: return "F32";
    case DType::bf16: return "BF16";
    case DType::f16: return "F16";
    case DType::i32: return "I32";
    case DType::i64: return "I64";
  }
  return "?";
}
DType from_st_dtype(const std::string& s, const std::string& path, const std::string& name) {
  for (DType t : {DType::f32, DType::bf16, DType::f16, DType::i32, DType::i64})
    if (s == st_dtype(t)) return t;
  ZT_THROW_AS(ErrorKind::checkpoint, "[safetensors] ", path, ": tensor '", name, "' has unsupported dtype '", s,
              "' (supported: F32, BF16, F16, I32, I64)");
}
}  // namespace

void write_safetensors(AtomicFile& out, const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  size_t off = 0;
  for (auto& [name, t] : tensors) {
    header[name] = {{"dtype", st_dtype(t.dtype())}, {"shape", t.shape()}, {"data_offsets", {off, off + t.nbytes()}}};
    off += t.nbytes();
  }
  std::string h = header.dump();
  h.append((8 - h.size() % 8) % 8, ' ');  // keep the data 8-byte aligned, as the spec suggests
  const uint64_t n = h.size();
  out.write(&n, 8);
  out.write(h);
  for (auto& [name, t] : tensors) {
    Tensor c = t.contiguous();
    out.write(c.raw_data(), c.nbytes());
  }
}

void save_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  AtomicFile f(path, ErrorKind::checkpoint, "[safetensors]");
  write_safetensors(f, tensors, metadata);
  f.commit();
  sync_dir(folder_of(path), ErrorKind::checkpoint, "[safetensors]");
}

const Tensor* LoadedTensors::find(const std::string& name) const {
  for (auto& [n, t] : tensors)
    if (n == name) return &t;
  return nullptr;
}

LoadedTensors load_safetensors(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  ZT_CHECK_AS(ErrorKind::checkpoint, f, "[safetensors] cannot open ", path);
  f.seekg(0, std::ios::end);
  const uint64_t size = uint64_t(f.tellg());
  f.seekg(0);
  uint64_t n = 0;
  ZT_CHECK_AS(ErrorKind::checkpoint, size >= 8 && f.read(reinterpret_cast<char*>(&n), 8), "[safetensors] ", path,
              ": file of ", size, " bytes is too short for the 8-byte header length");
  ZT_CHECK_AS(ErrorKind::checkpoint, n <= size - 8, "[safetensors] ", path, ": header length ", n,
              " at byte 0 exceeds the file size ", size);
  std::string h(n, '\0');
  f.read(h.data(), std::streamsize(n));
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(h);
  } catch (const nlohmann::json::parse_error& e) {
    ZT_THROW_AS(ErrorKind::checkpoint, "[safetensors] ", path, ": malformed JSON header at byte ", 8 + e.byte, ": ",
                e.what());
  }
  ZT_CHECK_AS(ErrorKind::checkpoint, header.is_object(), "[safetensors] ", path,
              ": the JSON header must be an object, got ", header.type_name());
  const uint64_t data_start = 8 + n, data_size = size - data_start;
  LoadedTensors out;
  for (auto& [name, v] : header.items()) {
    if (name == "__metadata__") {
      for (auto& [k, m] : v.items()) out.metadata[k] = m.is_string() ? m.get<std::string>() : m.dump();
      continue;
    }
    try {
      DType dt = from_st_dtype(v.at("dtype").get<std::string>(), path, name);
      Shape shape = v.at("shape").get<Shape>();
      auto offs = v.at("data_offsets").get<std::vector<uint64_t>>();
      ZT_CHECK_AS(ErrorKind::checkpoint, offs.size() == 2 && offs[0] <= offs[1] && offs[1] <= data_size,
                  "[safetensors] ", path, ": tensor '", name, "' data_offsets out of range (data section is ",
                  data_size, " bytes)");
      uint64_t bytes = dtype_size(dt);
      for (int64_t d : shape)
        ZT_CHECK_AS(ErrorKind::checkpoint, d >= 0 && !__builtin_mul_overflow(bytes, uint64_t(d), &bytes),
                    "[safetensors] ", path, ": tensor '", name, "' has an invalid shape ", shape_str(shape));
      ZT_CHECK_AS(ErrorKind::checkpoint, offs[1] - offs[0] == bytes, "[safetensors] ", path, ": tensor '", name,
                  "' has ", offs[1] - offs[0], " bytes but shape ", shape_str(shape), " needs ", bytes);
      Tensor t = Tensor::empty(shape, dt);
      f.seekg(std::streamoff(data_start + offs[0]));
      ZT_CHECK_AS(ErrorKind::checkpoint, f.read(static_cast<char*>(t.raw_data()), std::streamsize(t.nbytes())),
                  "[safetensors] ", path, ": short read of tensor '", name, "'");
      out.tensors.emplace_back(name, t);
    } catch (const nlohmann::json::exception& e) {
      ZT_THROW_AS(ErrorKind::checkpoint, "[safetensors] ", path, ": bad header entry for '", name, "': ", e.what());
    }
  }
  return out;
}

}  // namespace zt::ckpt
