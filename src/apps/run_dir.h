#pragma once
// The run directory as rank 0 writes it (Note [run directory]): one run at a time, outputs that
// are regular files, metrics appended with every write checked, and the final weights and
// summary committed together, the summary last.
//
// Note [run directory]: a run holds an flock on `zerotrain.lock` in the folder from start to
// end (the file says who: pid, host, start time), so a second run on the same folder stops at
// once with that line instead of tearing the first one's outputs. The lock file is never
// removed (that would let two runs lock two different files of that name), and its line, the
// last holder's, is read only while the lock is held. Temporaries
// left by a killed run (unique names, Note [atomic files]) are removed by the next holder.
// The outputs commit in one order: weights and summary are written and fsynced under
// temporary names, then the weights are renamed, then the summary, the folder is fsynced, and
// only then does metrics.jsonl get its "final" record. A failure before the renames changes
// nothing saved; summary.json always describes the model.safetensors beside it, except if the
// second rename alone fails (rename needs no space, so a full disk cannot do it).
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "zt/ckpt/safetensors.h"
#include "zt/core/atomic_file.h"
#include "zt/core/tensor.h"

namespace zt::apps {

// An flock on `<dir>/zerotrain.lock` held while alive (Note [run directory]); the folder is
// created first. `key` names the setting in messages ("run.dir", "checkpoint.dir"); a second
// holder gets ErrorKind::config naming the first, any other failure `kind`.
class DirLock {
 public:
  static constexpr const char* kLockName = "zerotrain.lock";
  DirLock(const std::string& dir, const std::string& key, ErrorKind kind, const std::string& who);
  ~DirLock();
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;

 private:
  int fd_ = -1;
};

class RunDir {
 public:
  static constexpr const char* kOutputs[] = {"model.safetensors", "summary.json", "metrics.jsonl"};

  // Creates the folder, takes the lock (else throws ErrorKind::config naming the holder),
  // removes temporaries of killed runs and checks every output is a regular file or absent.
  explicit RunDir(std::string dir);
  RunDir(const RunDir&) = delete;
  RunDir& operator=(const RunDir&) = delete;

  const std::string& dir() const { return dir_; }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }

  // One JSON line at the end of metrics.jsonl; any failed open, write or close throws
  // ErrorKind::checkpoint naming the file (a full disk, /dev/full behind a link).
  void append_metrics(const nlohmann::json& record);

  // The final outputs, written and fsynced under temporary names; dropped uncommitted, they
  // leave nothing behind. begin_stage opens model.safetensors for `entries`, which the caller
  // writes through `writer` one tensor at a time; finish_stage syncs it and writes the summary.
  // Without weights (run.save_weights false) the commit removes an earlier run's weights instead,
  // so summary.json never describes weights it did not write.
  struct Staged {
    std::unique_ptr<AtomicFile> weights, summary;
    std::unique_ptr<ckpt::SafetensorsWriter> writer;
  };
  std::unique_ptr<Staged> begin_stage(std::vector<ckpt::TensorEntry> entries, bool with_weights = true);
  void finish_stage(Staged& staged, const nlohmann::json& summary);
  // Renames the weights, then the summary; syncs the folder; appends `final_record`.
  void commit(Staged& staged, const nlohmann::json& final_record);

 private:
  void remove_stale_temporaries();
  std::string dir_;
  DirLock lock_;
};

}  // namespace zt::apps
