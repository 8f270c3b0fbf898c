#pragma once
// Note [checkpoint cadence]: a run's checkpoints every K steps and at its last step, folders
// step_<8 digits> in one directory (older ones beyond keep_last removed), written in the background
// where asked (Note [background save]) and committed at the next poll; a run resumes from "latest",
// a tag or a folder saved at any world size and stage. Every call is collective over the engine's
// group, at the same point on every rank.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "zt/zero/engine.h"

namespace zt::ckpt {
class Saver;
}

namespace zt::train {

struct CheckpointPlan {
  std::string dir;          // holds one folder per tag and `latest`
  int64_t every_steps = 0;  // 0: no checkpoints
  int keep_last = 0;        // > 0: older tags beyond this many are removed
  bool async = false;       // written behind the next steps (the same on every rank)
};

class Checkpoints {
 public:
  // `on_commit` hears each committed folder (rank 0 says so).
  Checkpoints(zero::Engine& engine, CheckpointPlan plan, std::function<void(const std::string&)> on_commit = nullptr);
  ~Checkpoints();

  // Loads `which` ("latest", a tag of plan.dir, or a folder) into the engine; its saved extra
  // (with "step": where the run goes on). The folder is resumed_from().
  nlohmann::json resume(const std::string& which);
  const std::string& resumed_from() const { return resumed_; }

  void poll();  // commits a background save whose files every rank has written (before a step's forward)
  // After step `steps_done` of `total`: saves when the cadence says so, with `extra` and "step";
  // `in_save` runs once this rank's file is on disk (fault injection).
  void after_step(int64_t steps_done, int64_t total, nlohmann::json extra, std::function<void()> in_save = nullptr);
  void before_stop();  // an agreed stop: a save in flight is committed, its error dropped (the stop's is said)
  void finish();       // the last save committed
  const std::string& last() const { return last_; }  // the folder committed last, or ""
  double blocked_s() const { return blocked_s_; }    // the run's time waiting in saves
  static std::string tag_of(int64_t step);           // "step_00000040"

 private:
  void blocking(const std::function<void()>& fn);
  zero::Engine& engine_;
  CheckpointPlan plan_;
  std::function<void(const std::string&)> on_commit_;
  std::unique_ptr<ckpt::Saver> saver_;
  std::string resumed_, last_;
  double blocked_s_ = 0;
};

}  // namespace zt::train
