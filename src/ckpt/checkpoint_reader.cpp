#include "checkpoint_reader.h"

#include <algorithm>
#include <filesystem>

#include "checkpoint_detail.h"
#include "zt/ckpt/checkpoint.h"
#include "zt/core/error.h"

namespace zt::ckpt::detail {

namespace fs = std::filesystem;
using nlohmann::json;

CheckpointReader::CheckpointReader(const std::string& path) : path_(path), meta_(read_metadata(path)) {
  try {
    world_ = meta_["world_size"];
    for (const auto& p : meta_["params"]) {
      names_.push_back(p["name"]);
      shapes_.push_back(p["shape"].get<Shape>());
    }
    where_.assign(names_.size(), {0, -1});
    const json& buffers = meta_["buffers"];
    for (size_t b = 0; b < buffers.size(); ++b) {
      padded_.push_back(buffers[b]["padded"]);
      for (const auto& s : buffers[b]["params"]) {
        const size_t i = s[0];
        const int64_t off = s[1], n = s[2];
        ZT_CHECK_AS(ErrorKind::checkpoint, i < names_.size() && off >= 0 && off + n <= padded_[b], "[ckpt] ", path,
                    ": buffer ", b, " lists parameter ", i, " at [", off, ", ", off + n, ") outside its ", padded_[b],
                    " elements");
        where_[i] = {b, off};
      }
    }
  } catch (const json::exception& e) {
    ZT_THROW_AS(ErrorKind::checkpoint, "[ckpt] ", path, "/metadata.json has a malformed layout: ", e.what());
  }
  for (size_t i = 0; i < where_.size(); ++i)
    ZT_CHECK_AS(ErrorKind::checkpoint, where_[i].second >= 0, "[ckpt] ", path, ": parameter '", names_[i],
                "' is in no saved buffer");
  ZT_CHECK_AS(ErrorKind::checkpoint, world_ > 0 && int(meta_["shards"].size()) == world_, "[ckpt] ", path, " lists ",
              meta_["shards"].size(), " shard files for world size ", world_);
}

int64_t CheckpointReader::param_numel(size_t i) const {
  int64_t n = 1;
  for (int64_t d : shapes_[i]) n *= d;
  return n;
}

bool CheckpointReader::has_tensor(const std::string& tensor) const {
  for (size_t b = 0; b < padded_.size(); ++b)
    if (!meta_["entries"].contains(entry_key(b, tensor))) return false;
  return true;
}

DType CheckpointReader::tensor_dtype(const std::string& tensor) const {
  ZT_CHECK_AS(ErrorKind::checkpoint, !padded_.empty() && has_tensor(tensor), "[ckpt] ", path_, " has no '", tensor,
              "' state (saved by another optimizer or precision)");
  return dtype_from_name(meta_["entries"][entry_key(0, tensor)]["dtype"].get<std::string>());
}

const FileReader& CheckpointReader::shard(int rank) {
  auto& slot = open_[rank];
  if (!slot) {
    const json& s = meta_["shards"].at(size_t(rank));
    const std::string file = (fs::path(path_) / s["file"].get<std::string>()).string();
    uint64_t bytes = 0;
    const std::string sum = hex64(file_checksum(file, &bytes));
    ZT_CHECK_AS(ErrorKind::checkpoint, bytes == s["bytes"].get<uint64_t>(), "[ckpt] ", file, " has ", bytes,
                " bytes; metadata.json says ", s["bytes"].get<uint64_t>(), " (truncated?)");
    ZT_CHECK_AS(ErrorKind::checkpoint, sum == s["xxh64"].get<std::string>(), "[ckpt] ", file,
                " is corrupt: its checksum is ", sum, ", metadata.json says ", s["xxh64"].get<std::string>());
    slot = std::make_unique<FileReader>(file);
  }
  return *slot;
}

void CheckpointReader::read_param_elements(const std::string& tensor, size_t i, int64_t begin, int64_t end, void* dst) {
  ZT_CHECK_AS(ErrorKind::invalid_argument, i < names_.size() && 0 <= begin && begin <= end && end <= param_numel(i),
              "[ckpt] elements [", begin, ", ", end, ") of parameter ", i, " do not exist");
  const auto [b, off] = where_[i];
  const json& entry = meta_["entries"].at(entry_key(b, tensor));
  const size_t elem = dtype_size(dtype_from_name(entry["dtype"].get<std::string>()));
  const int64_t S = padded_[b] / world_, base = entry["offset"];
  char* out = static_cast<char*>(dst);
  for (int64_t p = off + begin, stop_at = off + end; p < stop_at;) {
    const int r = int(p / S);
    const int64_t stop = std::min(stop_at, int64_t(r + 1) * S);
    shard(r).read_at(out, size_t(stop - p) * elem, uint64_t(base + (p - int64_t(r) * S) * int64_t(elem)));
    out += size_t(stop - p) * elem;
    p = stop;
  }
}

}  // namespace zt::ckpt::detail
