#include "run_dir.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>

#include "zt/ckpt/safetensors.h"
#include "zt/train/progress.h"

namespace zt::apps {

namespace {
constexpr ErrorKind kIo = ErrorKind::checkpoint;  // the run's outputs could not be written

std::string holder_line() {
  char host[256] = "?";
  ::gethostname(host, sizeof host - 1);
  char when[32] = "";
  const std::time_t now = std::time(nullptr);
  std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  return detail::concat("pid ", ::getpid(), " on host ", host, " since ", when);
}

std::string read_holder(int fd) {
  char buf[256];
  const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
  std::string s(buf, size_t(std::max<ssize_t>(n, 0)));
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  return s.empty() ? "holder unknown" : s;
}
}  // namespace

DirLock::DirLock(const std::string& dir, const std::string& key, ErrorKind kind, const std::string& who) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  ZT_CHECK_AS(kind, !ec, who, " cannot create ", key, " ", dir, ": ", ec.message());
  const std::string lock = dir + "/" + kLockName;
  check_output_path(lock, kind, who);
  fd_ = ::open(lock.c_str(), O_RDWR | O_CREAT | O_NONBLOCK | O_CLOEXEC, 0666);
  ZT_CHECK_AS(kind, fd_ >= 0, who, " cannot write in ", key, " ", dir, ": ", std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    const std::string holder = read_holder(fd_);
    ::close(fd_);
    fd_ = -1;
    ZT_CHECK_AS(kind, err == EWOULDBLOCK, who, " cannot lock ", lock, ": ", std::strerror(err));
    ZT_THROW_AS(ErrorKind::config, who, " ", key, " ", dir, " is in use by another run (", holder, ", lock file ", lock,
                "): wait for it to end or choose another ", key);
  }
  // Who holds it, for the next run's message; best effort (on a full disk the lock still holds).
  const std::string me = holder_line() + "\n";
  [[maybe_unused]] const bool named =
      ::ftruncate(fd_, 0) == 0 && ::pwrite(fd_, me.data(), me.size(), 0) == ssize_t(me.size());
}

DirLock::~DirLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the flock; the line stays, read only while locked
}

RunDir::RunDir(std::string dir) : dir_(std::move(dir)), lock_(dir_, "run.dir", kIo, "[run]") {
  remove_stale_temporaries();
  for (const char* name : kOutputs) check_output_path(path(name), kIo, "[run]");
}

void RunDir::remove_stale_temporaries() {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir_, ec)) {
    const std::string name = entry.path().filename().string();
    for (const char* base : {"model.safetensors", "summary.json"})
      if (is_temp_name_of(name, base) && entry.is_regular_file(ec)) std::filesystem::remove(entry.path(), ec);
  }
}

void RunDir::append_metrics(const nlohmann::json& record) {
  train::append_json_line(path("metrics.jsonl"), record, kIo, "[run]");
}

std::unique_ptr<RunDir::Staged> RunDir::begin_stage(std::vector<ckpt::TensorEntry> entries, bool with_weights) {
  auto s = std::make_unique<Staged>();
  if (!with_weights) return s;
  s->weights = std::make_unique<AtomicFile>(path("model.safetensors"), kIo, "[run]");
  s->writer = std::make_unique<ckpt::SafetensorsWriter>(*s->weights, std::move(entries),
                                                        std::map<std::string, std::string>{{"format", "zerotrain"}});
  return s;
}

void RunDir::finish_stage(Staged& s, const nlohmann::json& summary) {
  if (s.weights) {
    s.writer->finish();
    s.weights->finish();
  }
  s.summary = std::make_unique<AtomicFile>(path("summary.json"), kIo, "[run]");
  s.summary->write(summary.dump(2) + "\n");
  s.summary->finish();
}

void RunDir::commit(Staged& staged, const nlohmann::json& final_record) {
  if (staged.weights) {
    staged.weights->commit();
  } else {
    std::error_code ec;  // an earlier run's weights: not what the new summary describes
    std::filesystem::remove(path("model.safetensors"), ec);
    ZT_CHECK_AS(ErrorKind::checkpoint, !ec, "[run] cannot remove the earlier ", path("model.safetensors"), ": ",
                ec.message());
  }
  try {
    staged.summary->commit();  // last: summary.json describes the weights beside it
  } catch (const Error& e) {
    ZT_THROW_AS(e.kind(), e.what(), " (model.safetensors was already replaced; summary.json is the earlier one)");
  }
  sync_dir(dir_, kIo, "[run]");
  try {
    append_metrics(final_record);
  } catch (const Error& e) {
    ZT_THROW_AS(e.kind(), e.what(), " (model.safetensors and summary.json were saved in ", dir_, ")");
  }
}

}  // namespace zt::apps
