#pragma once
// Reading a saved checkpoint parameter by parameter (private to zt_ckpt): what the resharding
// loader and the streaming export share. Parameter i's element k of a saved tensor ("param",
// "master", "exp_avg", ...) is found as Note [checkpoint format] says: i sits at offset o of
// saved buffer b, so element k is at o + k, held by saving rank (o + k) / S_b.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "file_io.h"
#include "zt/core/dtype.h"
#include "zt/core/tensor.h"

namespace zt::ckpt::detail {

class CheckpointReader {
 public:
  // Reads and checks metadata.json of a checkpoint folder; opens no shard file yet.
  explicit CheckpointReader(const std::string& path);
  CheckpointReader(const CheckpointReader&) = delete;
  CheckpointReader& operator=(const CheckpointReader&) = delete;

  const std::string& path() const { return path_; }
  const nlohmann::json& metadata() const { return meta_; }
  size_t num_params() const { return names_.size(); }
  const std::string& param_name(size_t i) const { return names_[i]; }
  const Shape& param_shape(size_t i) const { return shapes_[i]; }
  int64_t param_numel(size_t i) const;
  size_t param_buffer(size_t i) const { return where_[i].first; }
  bool has_tensor(const std::string& tensor) const;  // saved for every buffer
  DType tensor_dtype(const std::string& tensor) const;

  // Copies parameter i's elements [begin, end) of saved `tensor` into dst, in the saved dtype.
  // A shard file's checksum and size are verified before its first read.
  void read_param_elements(const std::string& tensor, size_t i, int64_t begin, int64_t end, void* dst);

 private:
  const FileReader& shard(int rank);

  std::string path_;
  nlohmann::json meta_;
  int world_ = 1;
  std::vector<std::string> names_;
  std::vector<Shape> shapes_;
  std::vector<int64_t> padded_;                    // per saved buffer
  std::vector<std::pair<size_t, int64_t>> where_;  // per parameter: saved buffer, offset
  std::map<int, std::unique_ptr<FileReader>> open_;
};

}  // namespace zt::ckpt::detail
