// Reading Hugging Face folders through a mapping (Note [HF mapping] in hf_folder.h): the headers
// of every shard, what a mapping finds there, and a parameter's elements assembled from its pieces.
#include "zt/ckpt/hf_folder.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "checkpoint_detail.h"
#include "file_io.h"
#include "zt/ckpt/safetensors.h"
#include "zt/core/error.h"
#include "zt/core/strings.h"

namespace zt::ckpt {

namespace fs = std::filesystem;

HfParam hf_same(const std::string& name, const Shape& shape) {
  return {name, shape, {{name, 0, shape.empty() ? 1 : shape[0], false}}};
}

HfParam hf_rows(const std::string& name, const Shape& shape,
                const std::vector<std::pair<std::string, int64_t>>& parts) {
  HfParam p{name, shape, {}};
  int64_t row = 0;
  for (const auto& [tensor, rows] : parts) {
    p.pieces.push_back({tensor, row, row + rows, false});
    row += rows;
  }
  return p;
}

bool is_hf_folder(const std::string& path) {
  std::error_code ec;
  return !path.empty() && fs::is_directory(path, ec) && fs::is_regular_file(fs::path(path) / "config.json", ec);
}

namespace {

// A piece's shape in the folder: its rows of the parameter, or those transposed.
Shape piece_shape(const HfParam& p, const HfPiece& k) {
  Shape s = p.shape;
  if (s.empty()) return s;
  s[0] = k.row_end - k.row_begin;
  if (k.transpose) std::reverse(s.begin(), s.end());
  return s;
}

int64_t row_elems(const HfParam& p) {
  int64_t n = 1;
  for (size_t d = 1; d < p.shape.size(); ++d) n *= p.shape[d];
  return n;
}

}  // namespace

void detail::widen_f32(const void* from, DType t, int64_t n, float* dst) {
  const char* src = static_cast<const char*>(from);
  if (t == DType::f32) return void(std::memcpy(dst, src, size_t(n) * 4));
  for (int64_t k = 0; k < n; ++k) {
    uint16_t bits;
    std::memcpy(&bits, src + 2 * k, 2);
    dst[k] = t == DType::bf16 ? bf16_to_float(bf16{bits}) : f16_to_float(f16{bits});
  }
}

std::string HfMatch::problems() const {
  std::string out;
  for (auto [what, v] : {std::pair{"missing", &missing}, std::pair{"unused", &unused}, std::pair{"misshapen", &misshapen}})
    if (!v->empty()) out += (out.empty() ? "" : "; ") + std::string(what) + ": " + join(*v);
  return out;
}

struct HfFolder::Impl {
  struct Where {
    std::string file;
    SafetensorsEntry entry;
  };
  std::map<std::string, Where> tensors;
  std::vector<std::string> order;  // file order, for messages
  mutable std::map<std::string, std::unique_ptr<detail::FileReader>> open;
  mutable std::string cached;  // the last transposed piece read whole, f32
  mutable std::vector<float> cache;

  const detail::FileReader& reader(const std::string& file) const {
    auto& r = open[file];
    if (!r) r = std::make_unique<detail::FileReader>(file);
    return *r;
  }
  // n elements of `name` from element `at`, f32.
  void read(const std::string& name, int64_t at, int64_t n, float* dst) const {
    const Where& w = tensors.at(name);
    const size_t es = dtype_size(w.entry.dtype);
    std::vector<char> raw(size_t(n) * es);
    reader(w.file).read_at(raw.data(), raw.size(), w.entry.begin + uint64_t(at) * es);
    detail::widen_f32(raw.data(), w.entry.dtype, n, dst);
  }
};

HfFolder::HfFolder(const std::string& dir) : dir_(dir), impl_(std::make_unique<Impl>()) {
  const fs::path d(dir), index = d / "model.safetensors.index.json", single = d / "model.safetensors";
  std::vector<std::string> files;
  std::map<std::string, std::string> weight_map;
  std::error_code ec;
  if (fs::exists(index, ec)) {
    // Note [hostile JSON]: bounded in size and nesting before it is parsed (a real index is kilobytes).
    ZT_CHECK_AS(ErrorKind::checkpoint, fs::file_size(index, ec) <= (size_t(64) << 20) && !ec, "[hf] ", index.string(),
                " is larger than 64 MiB: not a safetensors index");
    std::ifstream in(index);
    const std::string text((std::istreambuf_iterator<char>(in)), {});
    const size_t deep = json_depth_exceeded_at(text, 16);
    ZT_CHECK_AS(ErrorKind::checkpoint, deep == std::string::npos, "[hf] ", index.string(),
                ": nesting deeper than 16 levels at byte ", deep);
    nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    ZT_CHECK_AS(ErrorKind::checkpoint, j.is_object() && j.contains("weight_map") && j["weight_map"].is_object(),
                "[hf] ", index.string(), " is not a safetensors index (a JSON object with a weight_map object)");
    for (const auto& [name, file] : j["weight_map"].items()) {
      ZT_CHECK_AS(ErrorKind::checkpoint, file.is_string(), "[hf] ", index.string(), ": weight_map['", name,
                  "'] is not a file name");
      const std::string f = file.get<std::string>();
      ZT_CHECK_AS(ErrorKind::checkpoint, !f.empty() && f.find('/') == std::string::npos && f != "." && f != "..",
                  "[hf] ", index.string(), ": weight_map['", name, "'] = '", f, "' is not a file of the folder");
      weight_map[name] = f;
      if (std::find(files.begin(), files.end(), f) == files.end()) files.push_back(f);
    }
  } else if (fs::exists(single, ec)) {
    files.push_back("model.safetensors");
  } else {
    const bool pickle = fs::exists(d / "pytorch_model.bin", ec) || fs::exists(d / "pytorch_model.bin.index.json", ec);
    ZT_THROW_AS(ErrorKind::checkpoint, "[hf] ", dir, " has neither model.safetensors nor model.safetensors.index.json",
                pickle ? " (its pytorch_model.bin is a pickle, which zerotrain does not read: convert it to safetensors)"
                       : "");
  }
  for (const std::string& f : files) {
    const SafetensorsHeader h = read_safetensors_header((d / f).string());
    for (const SafetensorsEntry& e : h.tensors) {
      ZT_CHECK_AS(ErrorKind::checkpoint, !impl_->tensors.count(e.name), "[hf] ", dir, ": tensor '", e.name,
                  "' is in two files (", impl_->tensors[e.name].file, " and ", h.source, ")");
      if (!weight_map.empty()) {
        auto it = weight_map.find(e.name);
        ZT_CHECK_AS(ErrorKind::checkpoint, it != weight_map.end() && it->second == f, "[hf] ", dir, ": tensor '",
                    e.name, "' of ", f, " is ", it == weight_map.end() ? "not in the index" : "indexed elsewhere");
      }
      impl_->tensors[e.name] = {h.source, e};
      impl_->order.push_back(e.name);
    }
  }
  for (const auto& [name, f] : weight_map)
    ZT_CHECK_AS(ErrorKind::checkpoint, impl_->tensors.count(name), "[hf] ", dir,
                "/model.safetensors.index.json names tensor '", name, "' in ", f, ", which does not hold it");
}

HfFolder::~HfFolder() = default;

std::vector<std::string> HfFolder::tensor_names() const { return impl_->order; }

HfMatch HfFolder::match(const HfMapping& m) const {
  HfMatch r;
  std::set<std::string> used;
  for (const HfParam& p : m.params) {
    bool ok = true;
    for (const HfPiece& k : p.pieces) {
      used.insert(k.tensor);
      auto it = impl_->tensors.find(k.tensor);
      if (it == impl_->tensors.end()) {
        r.missing.push_back(k.tensor);
        ok = false;
        continue;
      }
      const Shape want = piece_shape(p, k);
      const SafetensorsEntry& e = it->second.entry;
      ZT_CHECK_AS(ErrorKind::checkpoint, is_floating(e.dtype), "[hf] tensor '", k.tensor, "' has dtype ",
                  dtype_name(e.dtype), "; weights must be F32, BF16 or F16");  // a broken file, not a misfit
      if (e.shape != want) {
        r.misshapen.push_back(k.tensor + " " + dtype_name(e.dtype) + " " + shape_str(e.shape) + " in the folder, " +
                              shape_str(want) + " expected");
        ok = false;
      }
    }
    r.usable.push_back(ok);
    if (!ok) r.left_out.push_back(p.param);
  }
  for (const HfTied& t : m.tied) {
    if (!impl_->tensors.count(t.tensor)) continue;
    used.insert(t.tensor);
    auto a = impl_->tensors.find(t.tensor), b = impl_->tensors.find(t.same_as);
    if (b == impl_->tensors.end()) continue;  // named as missing already
    ZT_CHECK_AS(ErrorKind::checkpoint, is_floating(a->second.entry.dtype), "[hf] tensor '", t.tensor, "' has dtype ",
                dtype_name(a->second.entry.dtype), "; weights must be F32, BF16 or F16");
    const int64_t n = shape_numel(b->second.entry.shape);
    bool same = a->second.entry.shape == b->second.entry.shape;
    if (same) {  // tied: the same values, compared in chunks
      std::vector<float> x, y;
      for (int64_t at = 0; at < n && same; at += int64_t(1) << 20) {
        const int64_t k = std::min<int64_t>(int64_t(1) << 20, n - at);
        x.resize(size_t(k)), y.resize(size_t(k));
        impl_->read(t.tensor, at, k, x.data());
        impl_->read(t.same_as, at, k, y.data());
        same = std::memcmp(x.data(), y.data(), size_t(k) * 4) == 0;
      }
    }
    if (!same) r.misshapen.push_back(t.tensor + " (tied to " + t.same_as + ", but not equal to it)");
  }
  used.insert(m.buffers.begin(), m.buffers.end());
  for (const std::string& name : impl_->order)
    if (!used.count(name)) r.unused.push_back(name);
  return r;
}

void HfFolder::read(const HfParam& p, int64_t begin, int64_t n, float* dst) const {
  const int64_t C = row_elems(p), end = begin + n;
  for (const HfPiece& k : p.pieces) {
    const int64_t lo = std::max(begin, k.row_begin * C), hi = std::min(end, k.row_end * C);
    if (lo >= hi) continue;
    if (!k.transpose) {
      impl_->read(k.tensor, lo - k.row_begin * C, hi - lo, dst + (lo - begin));
      continue;
    }
    // Stored [C, rows]: read whole once (one piece of one parameter), then gathered.
    const int64_t rows = k.row_end - k.row_begin;
    if (impl_->cached != k.tensor) {
      impl_->cache.resize(size_t(rows * C));
      impl_->read(k.tensor, 0, rows * C, impl_->cache.data());
      impl_->cached = k.tensor;
    }
    for (int64_t e = lo; e < hi; ++e) {
      const int64_t r = e / C - k.row_begin, c = e % C;
      dst[e - begin] = impl_->cache[size_t(c * rows + r)];
    }
  }
}

Tensor HfFolder::read_param(const HfParam& p) const {
  Tensor t = Tensor::empty(p.shape, DType::f32, MemTag::workspace);
  read(p, 0, t.numel(), t.data<float>());
  impl_->cached.clear();
  impl_->cache = {};
  return t;
}

}  // namespace zt::ckpt
