#include "zt/optim/schedule.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include <nlohmann/json.hpp>

#include "zt/core/error.h"
#include "zt/core/strings.h"

namespace zt::optim {
namespace {

// A value quoted in a message: at most 80 characters (the config bounds its nesting).
std::string shown(const nlohmann::json& v) {
  std::string t = v.dump();
  return t.size() > 80 ? t.substr(0, 77) + "..." : t;
}

using nlohmann::json;
constexpr double kPi = 3.14159265358979323846;

std::vector<std::string> words(const std::string& s) {
  std::vector<std::string> out(1);
  for (char c : s) {
    if (c == '_')
      out.emplace_back();
    else
      out.back().push_back(c);
  }
  return out;
}

// Edit distance, less 2 per shared '_'-separated word, so a key missing a word
// ('warmup_steps') maps to the key that has it ('warmup_num_steps'), not 'warmup_type'.
std::string nearest(const std::string& s, const std::vector<std::string>& options) {
  const auto ws = words(s);
  std::string best;
  long best_score = std::numeric_limits<long>::max();
  for (const auto& o : options) {
    long shared = 0;
    for (const auto& w : words(o)) shared += std::count(ws.begin(), ws.end(), w) > 0;
    const long score = long(edit_distance(s, o)) - 2 * shared;
    if (score < best_score) best_score = score, best = o;
  }
  return best;
}

// Reads one schedule's params object: rejects unknown keys up front, then typed getters
// check each value's type and range and name the key in the error.
class Params {
 public:
  Params(std::string type, const json& p, std::vector<std::string> known)
      : type_(std::move(type)), p_(p.is_null() ? json::object() : p) {
    ZT_CHECK_AS(ErrorKind::config, p_.is_object(), "[scheduler] params for ", type_, " must be an object, got ",
                shown(p_));
    known.push_back("last_batch_iteration");
    for (const auto& [key, value] : p_.items()) {
      if (std::find(known.begin(), known.end(), key) == known.end())
        ZT_THROW_AS(ErrorKind::config, "[scheduler] unknown key '", key, "' for ", type_, " (did you mean '",
                    nearest(key, known), "'?)");
    }
    // Resuming is driven by the checkpoint's step, so only the fresh-start value is accepted.
    if (has("last_batch_iteration"))
      ZT_CHECK_AS(ErrorKind::config, integer("last_batch_iteration", -1, -1) == -1, "[scheduler] ", type_,
                  ": 'last_batch_iteration' must be -1 (resume comes from the checkpoint step)");
  }

  bool has(const char* key) const { return p_.contains(key); }

  double number(const char* key, double def, double lo, double hi) const {
    if (!has(key)) return def;
    const json& v = p_.at(key);
    ZT_CHECK_AS(ErrorKind::config, v.is_number(), "[scheduler] ", type_, ": '", key, "' must be a number",
                v.is_array() ? " (per-group lists are not supported)" : "", ", got ", shown(v));
    double d = v.get<double>();
    ZT_CHECK_AS(ErrorKind::config, std::isfinite(d) && d >= lo && d <= hi, "[scheduler] ", type_, ": '", key,
                "' must be in [", lo, ", ", hi, "], got ", shown(v));
    return d;
  }

  double required_number(const char* key, double lo, double hi) const {
    ZT_CHECK_AS(ErrorKind::config, has(key), "[scheduler] ", type_, " requires '", key, "'");
    return number(key, 0.0, lo, hi);
  }

  int64_t integer(const char* key, int64_t def, int64_t lo) const {
    if (!has(key)) return def;
    const json& v = p_.at(key);
    ZT_CHECK_AS(ErrorKind::config, v.is_number_integer(), "[scheduler] ", type_, ": '", key,
                "' must be an integer >= ", lo, ", got ", shown(v));
    int64_t i = v.get<int64_t>();
    ZT_CHECK_AS(ErrorKind::config, i >= lo, "[scheduler] ", type_, ": '", key, "' must be an integer >= ", lo, ", got ",
                i);
    return i;
  }

  bool boolean(const char* key, bool def) const {
    if (!has(key)) return def;
    const json& v = p_.at(key);
    ZT_CHECK_AS(ErrorKind::config, v.is_boolean(), "[scheduler] ", type_, ": '", key, "' must be true or false, got ",
                shown(v));
    return v.get<bool>();
  }

  std::string choice(const char* key, const std::string& def, const std::vector<std::string>& allowed) const {
    if (!has(key)) return def;
    const json& v = p_.at(key);
    const std::string s = v.is_string() ? v.get<std::string>() : shown(v);
    ZT_CHECK_AS(ErrorKind::config, v.is_string() && std::find(allowed.begin(), allowed.end(), s) != allowed.end(),
                "[scheduler] ", type_, ": '", key, "' must be one of ", join(allowed), ", got ", shown(v));
    return s;
  }

  // total_num_steps, falling back to the run's total step count when the key is absent.
  int64_t total_num_steps(int64_t total_steps) const {
    if (has("total_num_steps")) return integer("total_num_steps", 0, 1);
    ZT_CHECK_AS(ErrorKind::config, total_steps > 0, "[scheduler] ", type_,
                " requires 'total_num_steps' (or a run length to take it from)");
    return total_steps;
  }

 private:
  std::string type_;
  json p_;
};

const double kInf = std::numeric_limits<double>::infinity();

class ConstantLR final : public LRSchedule {
 public:
  explicit ConstantLR(double lr) : lr_(lr) {}
  double lr(int64_t) const override { return lr_; }
  std::string name() const override { return "constant"; }

 private:
  double lr_;
};

enum class Warmup { log, linear };

// DeepSpeed's warmup gamma at last_batch_iteration `last` (0 <= last < warmup_num_steps).
double warmup_gamma(Warmup w, int64_t last, int64_t warmup_num_steps) {
  if (w == Warmup::log) return (1.0 / std::log(double(warmup_num_steps))) * std::log(double(last + 1));
  return double(last) / double(warmup_num_steps);
}

// WarmupLR, and WarmupDecayLR when total_num_steps_ > 0 (linear decay after warmup).
class WarmupLR final : public LRSchedule {
 public:
  WarmupLR(double min_lr, double max_lr, int64_t warmup, Warmup w, int64_t total)
      : min_lr_(min_lr), delta_lr_(max_lr - min_lr), warmup_(std::max<int64_t>(2, warmup)), type_(w), total_(total) {}

  double lr(int64_t step) const override {
    const int64_t last = step - 1;  // Note [schedule step]
    if (last < 0) return min_lr_;
    return min_lr_ + delta_lr_ * gamma(last);
  }
  std::string name() const override { return total_ > 0 ? "WarmupDecayLR" : "WarmupLR"; }

 private:
  double gamma(int64_t last) const {
    if (last < warmup_) return warmup_gamma(type_, last, warmup_);
    if (total_ <= 0) return 1.0;
    return std::max(0.0, double(total_ - last) / std::max(1.0, double(total_ - warmup_)));
  }

  double min_lr_, delta_lr_;
  int64_t warmup_;
  Warmup type_;
  int64_t total_;
};

class WarmupCosineLR final : public LRSchedule {
 public:
  WarmupCosineLR(double base_lr, int64_t total, double warmup_min_ratio, int64_t warmup, double cos_min_ratio, Warmup w)
      : base_lr_(base_lr),
        total_(total),
        warmup_min_ratio_(warmup_min_ratio),
        warmup_(std::max<int64_t>(2, warmup)),
        cos_min_ratio_(cos_min_ratio),
        type_(w) {}

  double lr(int64_t step) const override { return base_lr_ * ratio(step - 1); }
  std::string name() const override { return "WarmupCosineLR"; }

 private:
  double ratio(int64_t last) const {
    if (last < 0) return 0.0;  // DeepSpeed's value before the first scheduler step
    if (last < warmup_) return warmup_min_ratio_ + warmup_gamma(type_, last, warmup_) * (1.0 - warmup_min_ratio_);
    const double real_last = double(last - warmup_ + 1);
    const double real_total = double(std::max<int64_t>(1, total_ - warmup_));
    const double progress = std::min(1.0, real_last / real_total);
    const double r = (1.0 + std::cos(kPi * progress)) / 2.0;
    return std::max(0.0, cos_min_ratio_ + (1.0 - cos_min_ratio_) * r);
  }

  double base_lr_;
  int64_t total_;
  double warmup_min_ratio_;
  int64_t warmup_;
  double cos_min_ratio_;
  Warmup type_;
};

struct OneCycleParams {
  double min_lr, max_lr, decay_lr_rate, first_size, second_size, decay_step_size;
  int64_t first_stairs, second_stairs;
};

class OneCycle final : public LRSchedule {
 public:
  explicit OneCycle(const OneCycleParams& p)
      : p_(p),
        total_size_(p.first_size + p.second_size),
        step_ratio_(p.first_size / total_size_),
        skip_decay_(p.decay_step_size == 0.0 || p.decay_lr_rate == 0.0) {}

  double lr(int64_t step) const override {
    const int64_t last = step - 1;  // Note [schedule step]
    if (double(last) < total_size_) return p_.min_lr + (p_.max_lr - p_.min_lr) * scale(last + 1);
    if (skip_decay_) return p_.min_lr;
    const double decay_interval = (double(last) - total_size_ + 1.0) / p_.decay_step_size;
    return p_.min_lr / (1.0 + p_.decay_lr_rate * decay_interval);
  }
  std::string name() const override { return "OneCycle"; }

 private:
  // DeepSpeed's _get_scale_factor at batch_iteration = last_batch_iteration + 1.
  double scale(int64_t batch_iteration) const {
    const double bi = double(batch_iteration);
    const double cycle = std::floor(1.0 + bi / total_size_);
    const double x = 1.0 + bi / total_size_ - cycle;
    double s;
    int64_t stairs;
    if (x <= step_ratio_) {
      s = x / step_ratio_;
      stairs = p_.first_stairs;
    } else {
      s = (x - 1.0) / (step_ratio_ - 1.0);
      stairs = p_.second_stairs;
    }
    if (stairs > 0) {
      const double ci = std::fmod(bi, total_size_);
      const double pos = ci <= p_.first_size ? ci * double(stairs) / p_.first_size
                                             : (total_size_ - ci) * double(stairs) / p_.second_size;
      s = std::floor(pos) / double(stairs);
    }
    return s;
  }

  OneCycleParams p_;
  double total_size_, step_ratio_;
  bool skip_decay_;
};

class LRRangeTest final : public LRSchedule {
 public:
  LRRangeTest(double min_lr, double step_size, double step_rate, bool staircase)
      : min_lr_(min_lr), step_size_(step_size), step_rate_(step_rate), staircase_(staircase) {}

  double lr(int64_t step) const override {
    const int64_t last = step - 1;  // Note [schedule step]; the constructor sets min_lr
    if (last < 0) return min_lr_;
    const double q = double(last) / step_size_;
    return min_lr_ * (1.0 + step_rate_ * (staircase_ ? std::floor(q) : q));
  }
  std::string name() const override { return "LRRangeTest"; }

 private:
  double min_lr_, step_size_, step_rate_;
  bool staircase_;
};

Warmup warmup_type(const Params& p) {
  return p.choice("warmup_type", "log", {"log", "linear"}) == "log" ? Warmup::log : Warmup::linear;
}

std::unique_ptr<LRSchedule> make_warmup(const std::string& type, const json& params, double base_lr,
                                        int64_t total_steps) {
  const bool decay = type == "WarmupDecayLR";
  std::vector<std::string> keys = {"warmup_min_lr", "warmup_max_lr", "warmup_num_steps", "warmup_type"};
  if (decay) keys.push_back("total_num_steps");
  Params p(type, params, keys);
  const double min_lr = p.number("warmup_min_lr", 0.0, 0.0, kInf);
  // DeepSpeed: WarmupLR's warmup_max_lr defaults to the optimizer's lr, WarmupDecayLR's to 0.001.
  const double max_lr = p.number("warmup_max_lr", decay ? 0.001 : base_lr, 0.0, kInf);
  const int64_t warmup = p.integer("warmup_num_steps", 1000, 1);
  const Warmup w = warmup_type(p);
  const int64_t total = decay ? p.total_num_steps(total_steps) : 0;
  return std::make_unique<WarmupLR>(min_lr, max_lr, warmup, w, total);
}

std::unique_ptr<LRSchedule> make_cosine(const json& params, double base_lr, int64_t total_steps) {
  Params p("WarmupCosineLR", params,
           {"total_num_steps", "warmup_min_ratio", "warmup_num_steps", "cos_min_ratio", "warmup_type"});
  const int64_t total = p.total_num_steps(total_steps);
  const double wmr = p.number("warmup_min_ratio", 0.0, 0.0, 1.0);
  const int64_t warmup = p.integer("warmup_num_steps", 1000, 1);
  const double cmr = p.number("cos_min_ratio", 0.0001, 0.0, 1.0);
  return std::make_unique<WarmupCosineLR>(base_lr, total, wmr, warmup, cmr, warmup_type(p));
}

std::unique_ptr<LRSchedule> make_one_cycle(const json& params) {
  // The momentum keys are accepted (so DeepSpeed configs load) and checked for type, but not
  // applied: FlatOptimizer's betas/momentum are fixed per run.
  Params p("OneCycle", params,
           {"cycle_min_lr", "cycle_max_lr", "decay_lr_rate", "cycle_first_step_size", "cycle_second_step_size",
            "cycle_first_stair_count", "cycle_second_stair_count", "decay_step_size", "cycle_momentum", "cycle_min_mom",
            "cycle_max_mom", "decay_mom_rate"});
  OneCycleParams o;
  o.min_lr = p.required_number("cycle_min_lr", 0.0, kInf);
  o.max_lr = p.required_number("cycle_max_lr", 0.0, kInf);
  o.decay_lr_rate = p.number("decay_lr_rate", 0.0, 0.0, kInf);
  o.first_size = double(p.integer("cycle_first_step_size", 2000, 1));
  o.second_size = double(p.integer("cycle_second_step_size", int64_t(o.first_size), 1));
  o.first_stairs = p.integer("cycle_first_stair_count", 0, 0);
  o.second_stairs = p.integer("cycle_second_stair_count", o.first_stairs, 0);
  o.decay_step_size = double(p.integer("decay_step_size", 0, 0));
  p.boolean("cycle_momentum", true);
  p.number("cycle_min_mom", 0.8, 0.0, 1.0);
  p.number("cycle_max_mom", 0.9, 0.0, 1.0);
  p.number("decay_mom_rate", 0.0, -kInf, kInf);
  return std::make_unique<OneCycle>(o);
}

std::unique_ptr<LRSchedule> make_range_test(const json& params) {
  Params p("LRRangeTest", params,
           {"lr_range_test_min_lr", "lr_range_test_step_size", "lr_range_test_step_rate", "lr_range_test_staircase"});
  const double min_lr = p.number("lr_range_test_min_lr", 1e-3, 0.0, kInf);
  const double size = double(p.integer("lr_range_test_step_size", 2000, 1));
  const double rate = p.number("lr_range_test_step_rate", 1.0, 0.0, kInf);
  return std::make_unique<LRRangeTest>(min_lr, size, rate, p.boolean("lr_range_test_staircase", false));
}

}  // namespace

const std::vector<std::string>& schedule_types() {
  static const std::vector<std::string> types = {"WarmupLR", "WarmupDecayLR", "WarmupCosineLR", "OneCycle",
                                                 "LRRangeTest"};
  return types;
}

std::unique_ptr<LRSchedule> make_schedule(const std::string& type, const nlohmann::json& params, double base_lr,
                                          int64_t total_steps) {
  ZT_CHECK_AS(ErrorKind::config, std::isfinite(base_lr) && base_lr >= 0.0, "[scheduler] base lr must be >= 0, got ",
              base_lr);
  if (type.empty()) {
    ZT_CHECK_AS(ErrorKind::config, params.is_null() || params.empty(),
                "[scheduler] params given without a scheduler type: ", shown(params));
    return std::make_unique<ConstantLR>(base_lr);
  }
  if (type == "WarmupLR" || type == "WarmupDecayLR") return make_warmup(type, params, base_lr, total_steps);
  if (type == "WarmupCosineLR") return make_cosine(params, base_lr, total_steps);
  if (type == "OneCycle") return make_one_cycle(params);
  if (type == "LRRangeTest") return make_range_test(params);
  ZT_THROW_AS(ErrorKind::config, "[scheduler] unknown type '", type, "' (allowed: ", join(schedule_types()),
              "; did you mean '", nearest(type, schedule_types()), "'?)");
}

}  // namespace zt::optim
