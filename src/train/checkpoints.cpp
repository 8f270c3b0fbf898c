#include "zt/train/checkpoints.h"

#include <chrono>
#include <cstdio>
#include <utility>

#include "zt/ckpt/checkpoint.h"

namespace zt::train {

Checkpoints::Checkpoints(zero::Engine& engine, CheckpointPlan plan, std::function<void(const std::string&)> on_commit)
    : engine_(engine), plan_(std::move(plan)), on_commit_(std::move(on_commit)) {
  saver_ = std::make_unique<ckpt::Saver>(engine_, [this](const std::string& path) {
    last_ = path;
    if (on_commit_) on_commit_(path);
  });
}

Checkpoints::~Checkpoints() = default;

nlohmann::json Checkpoints::resume(const std::string& which) {
  return ckpt::load_checkpoint(engine_, plan_.dir, which, &resumed_);
}

void Checkpoints::blocking(const std::function<void()>& fn) {
  const auto t = std::chrono::steady_clock::now();
  fn();
  blocked_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

void Checkpoints::poll() {
  blocking([&] { saver_->poll(); });
}

std::string Checkpoints::tag_of(int64_t step) {
  char tag[32];
  std::snprintf(tag, sizeof tag, "step_%08lld", (long long)step);
  return tag;
}

void Checkpoints::after_step(int64_t steps_done, int64_t total, nlohmann::json extra, std::function<void()> in_save) {
  poll();
  const int64_t every = plan_.every_steps;
  if (every <= 0 || (steps_done % every != 0 && steps_done != total)) return;
  extra["step"] = steps_done;
  const ckpt::SaveOptions o{plan_.dir, tag_of(steps_done), plan_.keep_last, std::move(extra), std::move(in_save)};
  blocking([&] { saver_->save(o, plan_.async); });
}

void Checkpoints::before_stop() {
  try {
    saver_->wait();
  } catch (const Error&) {  // every rank failed it alike; the stop's own line is the one to say
  }
}

void Checkpoints::finish() {
  blocking([&] { saver_->wait(); });
}

}  // namespace zt::train
