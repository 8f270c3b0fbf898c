// CIFAR-10 binary batches (zt/data/cifar.h): sizes checked first, then each file read whole and
// decoded through one per-channel lookup table.
#include "zt/data/cifar.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "split_size.h"
#include "zt/core/atomic_file.h"
#include "zt/core/parallel.h"

namespace zt::data {
namespace {

constexpr int64_t kClasses = 10;
constexpr int64_t kPlane = kCifarSize * kCifarSize;

using Lut = std::array<std::array<float, 256>, kCifarChannels>;
const Lut& lut() {
  static const Lut t = [] {
    Lut l{};
    for (size_t c = 0; c < l.size(); ++c)
      for (int v = 0; v < 256; ++v) l[c][size_t(v)] = (float(v) / 255.0f - kCifarMean[c]) / kCifarStd[c];
    return l;
  }();
  return t;
}

// The records in `size` bytes of file `name`, or a data error saying where the last one is cut.
int64_t records_in(uint64_t size, const std::string& name) {
  ZT_CHECK_AS(ErrorKind::data, size > 0, "[data] ", name, " is empty (CIFAR-10 records are ", kCifarRecordBytes,
              " bytes: 1 label + ", kCifarImageBytes, " pixels)");
  const uint64_t whole = size / uint64_t(kCifarRecordBytes) * uint64_t(kCifarRecordBytes);
  ZT_CHECK_AS(ErrorKind::data, whole == size, "[data] ", name, ": ", size, " bytes is not a whole number of ",
              kCifarRecordBytes, "-byte records (1 label + ", kCifarImageBytes, " pixels): the record at byte offset ",
              whole, " is cut after ", size - whole, " bytes");
  return int64_t(size / uint64_t(kCifarRecordBytes));
}

// Decodes `count` records into rows [first, first + count) of ds; labels are checked first.
void decode(const uint8_t* bytes, int64_t count, const std::string& name, Dataset& ds, int64_t first) {
  int32_t* y = ds.labels.data<int32_t>() + first;
  for (int64_t i = 0; i < count; ++i) {
    const uint8_t label = bytes[i * kCifarRecordBytes];
    ZT_CHECK_AS(ErrorKind::data, label < kClasses, "[data] ", name, ": label ", int(label), " of record ", i,
                " (byte offset ", i * kCifarRecordBytes, ") is outside 0..", kClasses - 1);
    y[i] = label;
  }
  const Lut& l = lut();
  float* x = ds.images.data<float>() + first * kCifarImageBytes;
  parallel_for(count, 16, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const uint8_t* src = bytes + i * kCifarRecordBytes + 1;
      float* dst = x + i * kCifarImageBytes;
      for (int64_t p = 0; p < kCifarImageBytes; ++p) dst[p] = l[size_t(p / kPlane)][src[p]];
    }
  });
}

struct File {
  std::string path;
  uint64_t size = 0;
  int64_t records = 0;
};

// Size and record count of a batch file, which must be a regular file (never opened otherwise).
File inspect(const std::string& path) {
  struct stat st {};
  ZT_CHECK_AS(ErrorKind::data, ::stat(path.c_str(), &st) == 0, "[data] ", path, ": ", std::strerror(errno),
              " (a CIFAR-10 split needs data_batch_1.bin .. data_batch_5.bin for train, test_batch.bin for test)");
  ZT_CHECK_AS(ErrorKind::data, S_ISREG(st.st_mode), "[data] ", path, " is ", file_type_name(st.st_mode),
              ", not a regular file");
  return {path, uint64_t(st.st_size), records_in(uint64_t(st.st_size), path)};
}

// The first `bytes` bytes of the file (all of it when bytes == its size), or a data error.
std::vector<uint8_t> read_bytes(const File& f, uint64_t bytes) {
  const int fd = ::open(f.path.c_str(), O_RDONLY | O_CLOEXEC);
  ZT_CHECK_AS(ErrorKind::data, fd >= 0, "[data] ", f.path, ": cannot open: ", std::strerror(errno));
  std::vector<uint8_t> buf(bytes);
  uint64_t got = 0;
  int err = 0;
  while (got < bytes) {
    const ssize_t r = ::read(fd, buf.data() + got, size_t(std::min<uint64_t>(bytes - got, 1u << 24)));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      err = r < 0 ? errno : 0;
      break;
    }
    got += uint64_t(r);
  }
  ::close(fd);
  ZT_CHECK_AS(ErrorKind::data, got == bytes, "[data] ", f.path, ": ",
              err ? std::string("read failed: ") + std::strerror(err) : std::string("the file shrank while reading"),
              " at byte offset ", got, " of ", bytes);
  return buf;
}

}  // namespace

Dataset load_cifar10(const std::string& dir, const std::string& split, int64_t limit) {
  ZT_CHECK(split == "train" || split == "test", "[data] unknown split '", split, "' (allowed: train, test)");
  ZT_CHECK(limit >= 0, "[data] limit must be >= 0, got ", limit);
  std::vector<std::string> names;
  if (split == "train")
    for (int i = 1; i <= 5; ++i) names.push_back("data_batch_" + std::to_string(i) + ".bin");
  else
    names.push_back("test_batch.bin");
  // Every file's size before any payload: a split that cannot load reads nothing.
  std::vector<File> files;
  int64_t total = 0;
  for (const std::string& n : names) {
    files.push_back(inspect((std::filesystem::path(dir) / n).string()));
    total += files.back().records;
  }
  const detail::SplitSize need{split, dir, limit > 0 ? std::min(limit, total) : total, kCifarImageBytes};
  need.check_budget();
  Dataset ds = need.allocate();
  int64_t row = 0;
  for (const File& f : files) {
    if (row == need.n) break;
    const int64_t count = std::min(f.records, need.n - row);
    const std::vector<uint8_t> bytes = read_bytes(f, uint64_t(count * kCifarRecordBytes));
    decode(bytes.data(), count, f.path, ds, row);
    row += count;
  }
  return ds;
}

Dataset parse_cifar10(const void* data, size_t size, const std::string& name) {
  const int64_t n = records_in(size, name);
  Dataset ds;
  ds.images = Tensor::empty({n, kCifarImageBytes}, DType::f32, MemTag::workspace);
  ds.labels = Tensor::empty({n}, DType::i32, MemTag::workspace);
  decode(static_cast<const uint8_t*>(data), n, name, ds, 0);
  return ds;
}

}  // namespace zt::data
