#include "safetensors_index.h"

#include <sys/stat.h>

#include "file_io.h"
#include "zt/core/error.h"

namespace zt::ckpt::detail {

using nlohmann::json;

const char* safetensors_dtype(DType t) {
  switch (t) {
    case DType::f32: return "F32";
    case DType::bf16: return "BF16";
    case DType::f16: return "F16";
    case DType::i32: return "I32";
    case DType::i64: return "I64";
  }
  return "?";
}

namespace {
DType from_safetensors(const std::string& s, const std::string& path, const std::string& name) {
  for (DType t : {DType::f32, DType::bf16, DType::f16, DType::i32, DType::i64})
    if (s == safetensors_dtype(t)) return t;
  ZT_THROW_AS(ErrorKind::checkpoint, "[safetensors] ", path, ": tensor '", name, "' has unsupported dtype '", s,
              "' (supported: F32, BF16, F16, I32, I64)");
}
}  // namespace

SafetensorsIndex read_safetensors_index(const std::string& path) {
  FileReader f(path);  // refuses what is not a regular file
  struct stat st {};
  ZT_CHECK_AS(ErrorKind::checkpoint, ::stat(path.c_str(), &st) == 0, "[safetensors] cannot stat ", path);
  const uint64_t size = uint64_t(st.st_size);
  ZT_CHECK_AS(ErrorKind::checkpoint, size >= 8, "[safetensors] ", path, ": file of ", size,
              " bytes is too short for the 8-byte header length");
  uint64_t n = 0;
  f.read_at(&n, 8, 0);
  ZT_CHECK_AS(ErrorKind::checkpoint, n <= size - 8, "[safetensors] ", path, ": header length ", n,
              " exceeds the file size ", size);
  std::string text(n, '\0');
  f.read_at(text.data(), n, 8);
  const json header = json::parse(text, nullptr, false);
  ZT_CHECK_AS(ErrorKind::checkpoint, !header.is_discarded() && header.is_object(), "[safetensors] ", path,
              ": the header is not a JSON object");
  const uint64_t data_start = 8 + n, data_size = size - data_start;
  SafetensorsIndex out{path, {}};
  for (const auto& [name, v] : header.items()) {
    if (name == "__metadata__") continue;
    try {
      IndexedTensor t;
      t.dtype = from_safetensors(v.at("dtype").get<std::string>(), path, name);
      t.shape = v.at("shape").get<Shape>();
      const auto offs = v.at("data_offsets").get<std::vector<uint64_t>>();
      ZT_CHECK_AS(ErrorKind::checkpoint, offs.size() == 2 && offs[0] <= offs[1] && offs[1] <= data_size,
                  "[safetensors] ", path, ": tensor '", name, "' data_offsets out of range (data section is ",
                  data_size, " bytes)");
      uint64_t bytes = dtype_size(t.dtype);
      for (int64_t d : t.shape)
        ZT_CHECK_AS(ErrorKind::checkpoint, d >= 0 && !__builtin_mul_overflow(bytes, uint64_t(d), &bytes),
                    "[safetensors] ", path, ": tensor '", name, "' has an invalid shape ", shape_str(t.shape));
      ZT_CHECK_AS(ErrorKind::checkpoint, offs[1] - offs[0] == bytes, "[safetensors] ", path, ": tensor '", name,
                  "' has ", offs[1] - offs[0], " bytes but shape ", shape_str(t.shape), " needs ", bytes);
      t.begin = data_start + offs[0];
      t.end = data_start + offs[1];
      out.tensors.emplace(name, t);
    } catch (const json::exception& e) {
      ZT_THROW_AS(ErrorKind::checkpoint, "[safetensors] ", path, ": bad header entry for '", name, "': ", e.what());
    }
  }
  return out;
}

std::string safetensors_header(const json& header) {
  std::string h = header.dump();
  h.append((8 - h.size() % 8) % 8, ' ');
  const uint64_t n = h.size();
  std::string out(reinterpret_cast<const char*>(&n), 8);
  return out + h;
}

}  // namespace zt::ckpt::detail
