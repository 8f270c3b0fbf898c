#include "zt/monitor/csv_monitor.h"

#include <unistd.h>

#include <charconv>
#include <cmath>
#include <cstdlib>

#include "append_file.h"
#include "zt/core/error.h"
#include "zt/core/strings.h"

namespace zt::monitor {

namespace {
constexpr const char* kWho = "[csv_monitor]";
}

std::string python_float_repr(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  // Shortest round-trip digits, then CPython's layout: scientific below 1e-4 and from 1e16 on
  // (float_repr_style 'short'), else positional with at least one digit after the point.
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  const std::string sci(buf, r.ptr);  // "-1.2345e-05"
  const size_t e = sci.find('e');
  const bool neg = sci[0] == '-';
  std::string digits;
  for (size_t i = neg; i < e; ++i)
    if (sci[i] != '.') digits.push_back(sci[i]);
  const int exp = std::atoi(sci.c_str() + e + 1);
  std::string out = neg ? "-" : "";  // appended piece by piece (GCC 12 warns on "lit" + string&&)
  if (exp < -4 || exp >= 16) {
    out.append(digits, 0, 1);
    if (digits.size() > 1) out.append(".").append(digits, 1);
    const int a = std::abs(exp);
    out.append(exp < 0 ? "e-" : "e+").append(a < 10 ? "0" : "").append(std::to_string(a));
  } else if (exp < 0) {
    out.append("0.").append(size_t(-exp - 1), '0').append(digits);
  } else if (size_t(exp) + 1 >= digits.size()) {
    out.append(digits).append(size_t(exp) + 1 - digits.size(), '0').append(".0");
  } else {
    out.append(digits, 0, size_t(exp) + 1).append(".").append(digits, size_t(exp) + 1);
  }
  return out;
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

std::string CsvMonitor::file_name_of(const std::string& tag) {
  std::string name = tag;
  for (char& c : name)
    if (c == '/' || c == ' ') c = '_';
  return name + ".csv";
}

std::string CsvMonitor::header_of(const std::string& tag) { return tag.substr(tag.rfind('/') + 1); }

CsvMonitor::CsvMonitor(const std::string& output_path, const std::string& job_name)
    : dir_(log_dir_of(output_path, job_name)) {
  detail::create_folder(dir_, kWho);
}

CsvMonitor::~CsvMonitor() {
  for (const auto& [name, fd] : fds_) ::close(fd);
}

void CsvMonitor::write_events(const std::vector<Event>& events) {
  for (const Event& e : events) {
    ZT_CHECK_AS(ErrorKind::invalid_argument, e.tag.find('\0') == std::string::npos, kWho,
                " a tag holds a NUL byte: ", printable(e.tag), " (it names a file)");
    const std::string name = file_name_of(e.tag), path = detail::in_folder(dir_, name);
    auto it = fds_.find(name);
    if (it == fds_.end()) it = fds_.emplace(name, detail::open_append(path, /*fresh=*/false, kWho)).first;
    std::string row = std::to_string(e.step) + "," + python_float_repr(e.value) + "\r\n";
    // Note [csv_monitor files]: the header heads the file only (also after a failed first append).
    if (detail::file_size(it->second, path, kWho) == 0) row = "step," + csv_field(header_of(e.tag)) + "\r\n" + row;
    detail::append_all(it->second, path, row, kWho);
  }
}

void CsvMonitor::flush() {
  for (const auto& [name, fd] : fds_) detail::sync_file(fd, detail::in_folder(dir_, name), kWho);
}

}  // namespace zt::monitor
