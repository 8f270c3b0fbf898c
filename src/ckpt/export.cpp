// Streaming export: the safetensors header is known from metadata.json alone, so it is written
// first; then each parameter's elements are read from the shard files a chunk at a time,
// converted in place, and appended. Memory is one chunk (≤ one parameter), never the model.

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "checkpoint_reader.h"
#include "file_io.h"
#include "safetensors_detail.h"
#include "zt/ckpt/export.h"
#include "zt/ckpt/safetensors.h"
#include "zt/core/atomic_file.h"
#include "zt/core/error.h"

namespace zt::ckpt {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// The file export writes: `out`, or the file a symlink there points to (the link is kept, as cp
// keeps it); it must be a regular file or nothing, never a FIFO or a device such as /dev/null.
std::string output_target(const std::string& out) {
  std::error_code ec;
  std::string target = out;
  if (fs::is_symlink(fs::symlink_status(out, ec))) {
    target = fs::weakly_canonical(out, ec).string();
    ZT_CHECK_AS(ErrorKind::checkpoint, !ec, "[export] cannot follow the link ", out, ": ", ec.message());
  }
  check_output_path(target, ErrorKind::checkpoint, "[export]");
  return target;
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
    h[r.param_name(i)] = {{"dtype", safetensors_dtype_name(dt)},
                          {"shape", r.param_shape(i)},
                          {"data_offsets", {data_bytes, data_bytes + n}}};
    data_bytes += n;
  }
  return h;
}

float load_elem(const char* p, DType t) {
  float f;
  if (t == DType::f32) {
    std::memcpy(&f, p, 4);
    return f;
  }
  uint16_t bits;
  std::memcpy(&bits, p, 2);
  return t == DType::bf16 ? bf16_to_float(bf16{bits}) : f16_to_float(f16{bits});
}

void store_elem(char* p, DType t, float v) {
  if (t == DType::f32) return void(std::memcpy(p, &v, 4));
  const uint16_t bits = t == DType::bf16 ? float_to_bf16(v).bits : float_to_f16(v).bits;
  std::memcpy(p, &bits, 2);
}

// Note [in-place conversion]: n elements at src (dtype a) become n elements at dst (dtype b) in
// the same buffer, element by element from the front. When b is wider, src sits at the buffer's
// tail (n * (|b| - |a|) bytes in): element k's write ends at (k+1)|b|, no later than element
// k+1's read starts; when b is narrower, src == dst and writes trail reads. Peak: n * max(|a|, |b|).
void convert_forward(const char* src, DType a, char* dst, DType b, size_t n) {
  if (a == b) {
    if (src != dst) std::memmove(dst, src, n * dtype_size(a));
    return;
  }
  const size_t sa = dtype_size(a), sb = dtype_size(b);
  for (size_t k = 0; k < n; ++k) store_elem(dst + k * sb, b, load_elem(src + k * sa, a));
}

}  // namespace

ExportStats export_safetensors(const std::string& checkpoint, const std::string& out, const ExportOptions& o) {
  ZT_CHECK_AS(ErrorKind::invalid_argument, is_floating(o.dtype), "[export] dtype must be f32, bf16 or f16, not ",
              dtype_name(o.dtype));
  ZT_CHECK_AS(ErrorKind::invalid_argument, o.chunk_elems > 0, "[export] chunk_elems must be > 0");
  const std::string target = output_target(out);
  detail::CheckpointReader r(checkpoint);
  const DType saved = r.tensor_dtype(o.tensor);
  ExportStats st;
  uint64_t data_bytes = 0;
  const std::string header = detail::encode_safetensors_header(export_header(r, o.dtype, data_bytes));
  for (const auto& b : r.metadata()["buffers"])
    st.largest_buffer_bytes = std::max(st.largest_buffer_bytes, b["numel"].get<uint64_t>() * dtype_size(o.dtype));

  const std::string tmp = unique_temp_path(target);
  try {
    detail::FileWriter w(tmp, header.size() + data_bytes);
    w.write(header.data(), header.size());
    const size_t in = dtype_size(saved), out_size = dtype_size(o.dtype);
    for (size_t i = 0; i < r.num_params(); ++i) {
      const int64_t n = r.param_numel(i), chunk = std::min(n, o.chunk_elems);
      // One buffer for reading and converting: Note [in-place conversion].
      Tensor buf =
          Tensor::empty({int64_t((size_t(chunk) * std::max(in, out_size) + 3) / 4)}, DType::f32, MemTag::workspace);
      char* base = static_cast<char*>(buf.raw_data());
      for (int64_t a = 0; a < n; a += chunk) {
        const size_t k = size_t(std::min(n, a + chunk) - a);
        char* src = base + (out_size > in ? k * (out_size - in) : 0);
        r.read_param_elements(o.tensor, i, a, a + int64_t(k), src);
        convert_forward(src, saved, base, o.dtype, k);
        w.write(base, k * out_size);
      }
      ++st.tensors;
    }
    w.finish();
    st.file_bytes = w.bytes();
    check_output_path(target, ErrorKind::checkpoint, "[export]");  // again: something may have appeared meanwhile
    std::error_code ec;
    fs::rename(tmp, target, ec);
    ZT_CHECK_AS(ErrorKind::checkpoint, !ec, "[export] cannot rename ", tmp, " to ", target, ": ", ec.message());
  } catch (...) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    throw;
  }
  const fs::path parent = fs::absolute(target).parent_path();
  detail::fsync_dir(parent.string());
  return st;
}

}  // namespace zt::ckpt
