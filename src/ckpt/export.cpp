// Streaming export: the safetensors header is known from metadata.json alone, so it is written
// first; then each parameter's elements are read from the shard files a chunk at a time,
// converted, and appended. Memory is one chunk (≤ one parameter), never the model.
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <random>

#include "checkpoint_reader.h"
#include "file_io.h"
#include "safetensors_index.h"
#include "zt/ckpt/export.h"
#include "zt/core/error.h"

namespace zt::ckpt {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string temp_name(const std::string& out) {
  std::random_device rd;
  return out + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(rd());
}

// Parameters in model order, their bytes in the output dtype back to back.
json export_header(const detail::CheckpointReader& r, DType dt, uint64_t& data_bytes) {
  json h = json::object();
  const json& m = r.metadata();
  h["__metadata__"] = {{"format", "pt"},  // what Hugging Face loaders expect
                       {"zerotrain.tag", m.value("tag", "")},
                       {"zerotrain.step", std::to_string(m.value("step", int64_t(0)))}};
  data_bytes = 0;
  for (size_t i = 0; i < r.num_params(); ++i) {
    const uint64_t n = uint64_t(r.param_numel(i)) * dtype_size(dt);
    h[r.param_name(i)] = {{"dtype", detail::safetensors_dtype(dt)},
                          {"shape", r.param_shape(i)},
                          {"data_offsets", {data_bytes, data_bytes + n}}};
    data_bytes += n;
  }
  return h;
}

}  // namespace

ExportStats export_safetensors(const std::string& checkpoint, const std::string& out, const ExportOptions& o) {
  ZT_CHECK_AS(ErrorKind::invalid_argument, is_floating(o.dtype), "[export] dtype must be f32, bf16 or f16, not ",
              dtype_name(o.dtype));
  ZT_CHECK_AS(ErrorKind::invalid_argument, o.chunk_elems > 0, "[export] chunk_elems must be > 0");
  detail::CheckpointReader r(checkpoint);
  const DType saved = r.tensor_dtype(o.tensor);
  ExportStats st;
  uint64_t data_bytes = 0;
  const std::string header = detail::safetensors_header(export_header(r, o.dtype, data_bytes));
  for (const auto& b : r.metadata()["buffers"])
    st.largest_buffer_bytes = std::max(st.largest_buffer_bytes, b["numel"].get<uint64_t>() * dtype_size(o.dtype));

  const std::string tmp = temp_name(out);
  try {
    detail::FileWriter w(tmp, header.size() + data_bytes);
    w.write(header.data(), header.size());
    for (size_t i = 0; i < r.num_params(); ++i) {
      const int64_t n = r.param_numel(i), chunk = std::min(n, o.chunk_elems);
      Tensor raw = Tensor::empty({chunk}, saved, MemTag::workspace);
      Tensor conv = saved == o.dtype ? raw : Tensor::empty({chunk}, o.dtype, MemTag::workspace);
      for (int64_t a = 0; a < n; a += chunk) {
        const int64_t z = std::min(n, a + chunk);
        Tensor src = raw.slice(0, 0, z - a), dst = conv.slice(0, 0, z - a);
        r.read_param_elements(o.tensor, i, a, z, src.raw_data());
        if (saved != o.dtype) dst.copy_(src);
        w.write(dst.raw_data(), dst.nbytes());
      }
      ++st.tensors;
    }
    w.finish();
    st.file_bytes = w.bytes();
    std::error_code ec;
    fs::rename(tmp, out, ec);
    ZT_CHECK_AS(ErrorKind::checkpoint, !ec, "[export] cannot rename ", tmp, " to ", out, ": ", ec.message());
  } catch (...) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    throw;
  }
  const fs::path parent = fs::absolute(out).parent_path();
  detail::fsync_dir(parent.string());
  return st;
}

}  // namespace zt::ckpt
