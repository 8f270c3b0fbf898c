#pragma once
// Sharded checkpoints (Note [checkpoint format]): a directory per tag with metadata.json and one
// shard file per rank, written by every rank in parallel, committed by renames (the `latest`
// pointer moves last), loadable at any world size and stage by re-partitioning per parameter.
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "zt/ckpt/metadata.h"
#include "zt/zero/engine.h"

namespace zt::ckpt {

struct SaveOptions {
  std::string dir;       // checkpoint.dir: holds one folder per tag and `latest`
  std::string tag;       // e.g. step_00000040
  int keep_last = 0;     // > 0: remove older tags beyond this many (never the one just saved)
  nlohmann::json extra;  // the run's own state: step, data position, config (kept verbatim)
  std::function<void()> after_shard_written =
      nullptr;  // fault injection: this rank's file is on disk, nothing committed
  bool keep_existing = false;  // import: a folder of this tag, or a `latest` in dir, is an error, not replaced
};

// Note [background save]: FastPersist's overlap (Microsoft, 2024). An async save copies this
// rank's shard into host staging (its file's bytes, reused by the next save) and returns; a
// thread writes and fsyncs the file while training goes on, and the commit (checksums gathered,
// metadata.json, renames, `latest` last) happens at the first poll() that finds every rank's file
// written, or at wait(). So a crash before the commit leaves the previous `latest` as it was, a
// second save waits for the first, and the last one of a run is waited for by its caller.
// Every call is collective over the engine's group, at the same point on every rank.
class Saver {
 public:
  // on_commit: told each folder committed (by save, poll or wait).
  explicit Saver(zero::Engine& engine, std::function<void(const std::string& folder)> on_commit = nullptr);
  ~Saver();  // a write in flight ends; nothing is committed
  Saver(const Saver&) = delete;
  Saver& operator=(const Saver&) = delete;

  // Commits a save in flight first; then saves `opts` whole (async false: returns its folder) or
  // snapshots it and starts its write (async: returns ""). Any rank's failure is the same
  // AgreedError (checkpoint) on every rank, earlier checkpoints and `latest` untouched.
  std::string save(const SaveOptions& opts, bool async);
  std::string poll();  // commits the save in flight if every rank's file is written; its folder or ""
  std::string wait();  // commits the save in flight, waiting for its writes; its folder or ""
  bool pending() const { return job_ != nullptr; }
  size_t staging_bytes() const { return staging_bytes_; }

 private:
  struct Job;
  std::string commit();
  zero::Engine& engine_;
  std::function<void(const std::string&)> on_commit_;
  std::unique_ptr<Job> job_;
  // An async save's snapshot, written by Job::writer: 4 KiB aligned and rounded (O_DIRECT), kept.
  std::unique_ptr<char, void (*)(void*)> staging_{nullptr, &std::free};
  size_t staging_bytes_ = 0, staging_capacity_ = 0;
};

// A save waited for: Saver(engine).save(opts, false).
std::string save_checkpoint(zero::Engine& engine, const SaveOptions& opts);

// `which` is "latest" (the tag `dir/latest` names), a tag inside dir, or a checkpoint folder.
std::string resolve_checkpoint(const std::string& dir, const std::string& which);

// Collective: loads parameters, fp32 master, optimizer states and counters into an engine of
// any world size and stage (same model, precision and optimizer). Verifies the checksum of
// every shard file it reads. Returns the saved `extra`. Every failure is the same AgreedError
// on every rank.
nlohmann::json load_checkpoint(zero::Engine& engine, const std::string& path);
// The same for `which` in `dir` (resolve_checkpoint), resolved inside the collective so that a
// bad `latest` is one agreed error too; the folder loaded is put in *path.
nlohmann::json load_checkpoint(zero::Engine& engine, const std::string& dir, const std::string& which,
                               std::string* path);

// Recomputes every shard file's checksum and size; throws naming the first bad file.
void verify_checkpoint(const std::string& path);
// Tags in dir, oldest first (by the step in their metadata), and which one `latest` names.
std::vector<std::string> list_checkpoints(const std::string& dir);

}  // namespace zt::ckpt
