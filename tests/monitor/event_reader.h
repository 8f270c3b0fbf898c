#pragma once
// A reader of TensorBoard event files written from Note [event files] alone (not from the
// writer's code): TFRecord framing with both CRCs checked, and a protobuf decoder of the Event
// fields TensorBoard's scalars use. Any damage throws std::runtime_error saying where.
#include <bit>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "zt/monitor/crc32c.h"

namespace zt::monitor::test_util {

struct ScalarValue {
  std::string tag;
  float value = 0;
};

struct DecodedEvent {
  double wall_time = 0;
  int64_t step = 0;
  std::optional<std::string> file_version;
  std::vector<ScalarValue> values;  // the summary's, if any
};

inline uint64_t le(const std::string& s, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= uint64_t(uint8_t(s[at + i])) << (8 * i);
  return v;
}

// Every record's data, in order; throws on a bad CRC or a cut record.
inline std::vector<std::string> read_records(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot open " + path);
  const std::string bytes((std::istreambuf_iterator<char>(f)), {});
  std::vector<std::string> out;
  for (size_t at = 0; at < bytes.size();) {
    const std::string where = " in the record at byte " + std::to_string(at);
    if (bytes.size() - at < 12) throw std::runtime_error("a cut header" + where);
    const uint64_t len = le(bytes, at, 8);
    if (mask_crc(crc32c(bytes.data() + at, 8)) != uint32_t(le(bytes, at + 8, 4)))
      throw std::runtime_error("length CRC mismatch" + where);
    if (bytes.size() - at - 12 < len + 4) throw std::runtime_error("cut data" + where);
    std::string data = bytes.substr(at + 12, len);
    if (mask_crc(crc32c(data)) != uint32_t(le(bytes, at + 12 + len, 4)))
      throw std::runtime_error("data CRC mismatch" + where);
    out.push_back(std::move(data));
    at += 16 + len;
  }
  return out;
}

// Protobuf wire format: a message is (key varint = field << 3 | wire type, payload)*.
class ProtoReader {
 public:
  explicit ProtoReader(const std::string& s) : s_(s) {}
  bool done() const { return at_ == s_.size(); }
  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 70; shift += 7) {
      if (at_ >= s_.size()) throw std::runtime_error("cut varint");
      const uint8_t b = uint8_t(s_[at_++]);
      v |= uint64_t(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
    throw std::runtime_error("varint longer than 10 bytes");
  }
  uint64_t fixed(int bytes) {
    if (s_.size() - at_ < size_t(bytes)) throw std::runtime_error("cut fixed field");
    const uint64_t v = le(s_, at_, bytes);
    at_ += size_t(bytes);
    return v;
  }
  std::string bytes() {
    const uint64_t n = varint();
    if (s_.size() - at_ < n) throw std::runtime_error("cut length-delimited field");
    std::string v = s_.substr(at_, n);
    at_ += n;
    return v;
  }
  void skip(int wire) {
    if (wire == 0)
      varint();
    else if (wire == 1)
      fixed(8);
    else if (wire == 2)
      bytes();
    else if (wire == 5)
      fixed(4);
    else
      throw std::runtime_error("wire type " + std::to_string(wire));
  }

 private:
  const std::string& s_;
  size_t at_ = 0;
};

inline ScalarValue decode_value(const std::string& s) {
  ScalarValue v;
  ProtoReader r(s);
  while (!r.done()) {
    const uint64_t key = r.varint();
    if (key == (1 << 3 | 2))
      v.tag = r.bytes();
    else if (key == (2 << 3 | 5))
      v.value = std::bit_cast<float>(uint32_t(r.fixed(4)));
    else
      r.skip(int(key & 7));
  }
  return v;
}

inline DecodedEvent decode_event(const std::string& s) {
  DecodedEvent e;
  ProtoReader r(s);
  while (!r.done()) {
    const uint64_t key = r.varint();
    if (key == (1 << 3 | 1)) {
      e.wall_time = std::bit_cast<double>(r.fixed(8));
    } else if (key == (2 << 3 | 0)) {
      e.step = int64_t(r.varint());
    } else if (key == (3 << 3 | 2)) {
      e.file_version = r.bytes();
    } else if (key == (5 << 3 | 2)) {
      const std::string summary = r.bytes();
      ProtoReader sr(summary);
      while (!sr.done()) {
        const uint64_t k = sr.varint();
        if (k == (1 << 3 | 2))
          e.values.push_back(decode_value(sr.bytes()));
        else
          sr.skip(int(k & 7));
      }
    } else {
      r.skip(int(key & 7));
    }
  }
  return e;
}

inline std::vector<DecodedEvent> read_events(const std::string& path) {
  std::vector<DecodedEvent> out;
  for (const std::string& rec : read_records(path)) out.push_back(decode_event(rec));
  return out;
}

}  // namespace zt::monitor::test_util
