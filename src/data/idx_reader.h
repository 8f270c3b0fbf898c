#pragma once
// Header-first IDX reading shared by read_idx, parse_idx and load_mnist (Note [bounded IDX reads]
// in idx.cpp): the header is read and checked before any payload is decoded.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "zt/data/mnist.h"

namespace zt::data::detail {

class IdxReader {
 public:
  // `path`, or `path`.gz if only that exists; it must be a regular file (never opened otherwise).
  static IdxReader open(const std::string& path);
  // A file's bytes held in memory; `name` stands for the file in errors.
  IdxReader(const void* data, size_t size, std::string name);
  IdxReader(IdxReader&&) noexcept;
  ~IdxReader();

  const std::string& name() const;  // the file that was opened (with .gz if so)
  const std::vector<int64_t>& dims() const;
  uint64_t header_bytes() const;
  uint64_t payload_bytes() const;  // the product of the dims (uint8 items)

  // The payload (never more than the header says), then a bounded look for trailing bytes.
  IdxArray read();

 private:
  struct Impl;
  explicit IdxReader(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace zt::data::detail
