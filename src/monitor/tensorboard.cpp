#include "zt/monitor/tensorboard.h"

#include <unistd.h>

#include <atomic>
#include <bit>
#include <chrono>
#include <cstdio>

#include "append_file.h"
#include "zt/monitor/crc32c.h"

namespace zt::monitor {

namespace {
constexpr const char* kWho = "[tensorboard]";
constexpr int kVarint = 0, kFixed64 = 1, kBytes = 2, kFixed32 = 5;  // protobuf wire types

void put_varint(std::string& out, uint64_t v) {
  for (; v >= 0x80; v >>= 7) out.push_back(char(uint8_t(v) | 0x80));
  out.push_back(char(v));
}
void put_le(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(char(uint8_t(v >> (8 * i))));
}
void put_key(std::string& out, int field, int wire) { put_varint(out, uint64_t(field) << 3 | uint64_t(wire)); }
void put_bytes(std::string& out, int field, const std::string& bytes) {
  put_key(out, field, kBytes);
  put_varint(out, bytes.size());
  out += bytes;
}

// Event's first two fields (Note [event files]): proto3 leaves a zero step out.
std::string event_head(double wall_time, int64_t step) {
  std::string ev;
  put_key(ev, 1, kFixed64);
  put_le(ev, std::bit_cast<uint64_t>(wall_time), 8);
  if (step != 0) {
    put_key(ev, 2, kVarint);
    put_varint(ev, uint64_t(step));  // a negative step: ten bytes, two's complement
  }
  return ev;
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// tensorboard's EventFileWriter name (Note [event files]); n counts this process's files.
std::string event_file_name(double now) {
  static std::atomic<int> files{0};
  char host[256] = "localhost";
  if (::gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  host[sizeof host - 1] = '\0';
  char name[400];
  std::snprintf(name, sizeof name, "events.out.tfevents.%010lld.%s.%ld.%d", (long long)now, host, long(::getpid()),
                files++);
  return name;
}
}  // namespace

std::string tfrecord(const std::string& data) {
  std::string rec, len;
  put_le(len, data.size(), 8);
  rec.reserve(data.size() + 16);
  rec += len;
  put_le(rec, mask_crc(crc32c(len)), 4);
  rec += data;
  put_le(rec, mask_crc(crc32c(data)), 4);
  return rec;
}

std::string scalar_event(double wall_time, const std::string& tag, double value, int64_t step) {
  std::string v;  // Summary.Value: simple_value sits in a oneof, so it is written even when 0
  put_bytes(v, 1, tag);
  put_key(v, 2, kFixed32);
  put_le(v, std::bit_cast<uint32_t>(float(value)), 4);
  std::string summary;
  put_bytes(summary, 1, v);
  std::string ev = event_head(wall_time, step);
  put_bytes(ev, 5, summary);
  return ev;
}

TensorBoardMonitor::TensorBoardMonitor(const std::string& output_path, const std::string& job_name, Clock clock)
    : dir_(log_dir_of(output_path, job_name)), clock_(clock ? clock : now_seconds) {
  detail::create_folder(dir_, kWho);
  const double now = clock_();
  file_ = detail::in_folder(dir_, event_file_name(now));
  fd_ = detail::open_append(file_, /*fresh=*/true, kWho);
  std::string version = event_head(now, 0);
  put_bytes(version, 3, "brain.Event:2");
  try {
    detail::append_all(fd_, file_, tfrecord(version), kWho);
  } catch (...) {
    ::close(fd_);
    throw;
  }
}

TensorBoardMonitor::~TensorBoardMonitor() { ::close(fd_); }

void TensorBoardMonitor::write_events(const std::vector<Event>& events) {
  if (events.empty()) return;
  const double now = clock_();
  std::string records;
  for (const Event& e : events) records += tfrecord(scalar_event(now, e.tag, e.value, e.step));
  detail::append_all(fd_, file_, records, kWho);
}

void TensorBoardMonitor::flush() { detail::sync_file(fd_, file_, kWho); }

}  // namespace zt::monitor
