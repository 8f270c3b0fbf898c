// The zerotrain command line. Errors become one line on stderr and a non-zero exit status:
// 1 for a failed run, 2 for bad usage.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "commands.h"
#include "zt/core/error.h"

namespace {

const char* kUsage =
    "usage: zerotrain <command> [options] [key=value ...]\n"
    "\n"
    "Data-parallel training with ZeRO stages 0-3 (DeepSpeed-style JSON configuration).\n"
    "\n"
    "commands:\n"
    "  train     --config FILE [key=value ...]   train; under mpirun -np N, on N ranks\n"
    "  eval      --config FILE [--weights FILE]  test accuracy of saved weights\n"
    "                                            (default: <run.dir>/model.safetensors)\n"
    "  estimate  --config FILE --world N [--memory-gib G]\n"
    "                                            per-rank bytes of model states per stage,\n"
    "                                            and the largest model that fits G GiB\n"
    "\n"
    "key=value overrides any configuration key by its dotted path, e.g.\n"
    "  zero_optimization.stage=3 optimizer.params.lr=3e-4 run.dir=runs/try2\n"
    "\n"
    "options:\n"
    "  -h, --help     show this help (also after a command)\n"
    "  --version      print the version\n"
    "\n"
    "exit status: 0 success, 1 the run failed (the error is printed on one line), 2 bad usage\n";

struct Args {
  std::string command, config, weights;
  int world = 0;
  double memory_gib = 0;
  std::vector<std::string> overrides;
  bool help = false;
};

int usage_error(const std::string& msg) {
  std::fprintf(stderr, "zerotrain: %s (see zerotrain --help)\n", msg.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  std::vector<std::string> args(argv + 1, argv + argc);
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& s = args[i];
    auto value = [&](const char* flag) -> std::string {
      if (i + 1 >= args.size()) throw std::invalid_argument(std::string(flag) + " needs a value");
      return args[++i];
    };
    try {
      if (s == "-h" || s == "--help") a.help = true;
      else if (s == "--version") return std::printf("zerotrain 0.1.0\n"), 0;
      else if (s == "--config") a.config = value("--config");
      else if (s == "--weights") a.weights = value("--weights");
      else if (s == "--world") a.world = std::stoi(value("--world"));
      else if (s == "--memory-gib") a.memory_gib = std::stod(value("--memory-gib"));
      else if (s.rfind("--", 0) == 0) return usage_error("unknown option '" + s + "'");
      else if (a.command.empty()) a.command = s;
      else if (s.find('=') != std::string::npos) a.overrides.push_back(s);
      else return usage_error("unexpected argument '" + s + "' (overrides look like key=value)");
    } catch (const std::exception& e) {
      return usage_error(std::string("bad value for ") + s + ": " + e.what());
    }
  }
  if (a.help || a.command.empty()) {
    std::fputs(kUsage, a.help ? stdout : stderr);
    return a.help ? 0 : 2;
  }
  if (a.command != "train" && a.command != "eval" && a.command != "estimate")
    return usage_error("unknown command '" + a.command + "' (commands: train, eval, estimate)");
  if (a.config.empty()) return usage_error(a.command + " needs --config FILE");
  if (a.command == "estimate" && a.world < 1) return usage_error("estimate needs --world N with N >= 1");

  zt::comm::GroupPtr group;
  try {
    zt::config::Config cfg = zt::config::load(a.config, a.overrides);
    if (a.command == "eval")
      return zt::apps::run_eval(cfg, a.weights.empty() ? cfg.run.dir + "/model.safetensors" : a.weights);
    if (a.command == "estimate") return zt::apps::run_estimate(cfg, a.world, a.memory_gib);
    group = zt::comm::make_group(cfg.run.comm_backend);
    return zt::apps::run_train(cfg, *group);
  } catch (const zt::Error& e) {
    const bool many = group && group->size() > 1;
    const bool same_everywhere = std::strncmp(e.what(), "[config]", 8) == 0;
    if (!many || group->rank() == 0 || !same_everywhere) {
      if (many) std::fprintf(stderr, "zerotrain: error on rank %d: %s\n", group->rank(), e.what());
      else std::fprintf(stderr, "zerotrain: error: %s\n", e.what());
      std::fflush(stderr);
    }
    // A rank-local failure must not leave the peers waiting: end the whole job.
    if (many && !same_everywhere) group->abort_job(1);
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "zerotrain: error: %s\n", e.what());
    if (group && group->size() > 1) group->abort_job(1);
    return 1;
  }
}
