// `zerotrain ckpt inspect`: what a checkpoint holds, read from metadata.json alone (no shard
// file is opened): the run, counters, parameters and where each sits, buffers, saved states,
// shard files, and the run's own state (extra). --json prints the same as one object.
#include <cstdio>
#include <filesystem>

#include "ckpt_commands.h"
#include "zt/ckpt/checkpoint.h"
#include "zt/core/allocator.h"

namespace zt::apps {

namespace fs = std::filesystem;
using nlohmann::json;

std::string checkpoint_folder(const std::string& path, const std::string& tag);  // ckpt_commands.cpp

namespace {

int64_t numel_of(const json& shape) {
  int64_t n = 1;
  for (const auto& d : shape) n *= d.get<int64_t>();
  return n;
}

json describe(const std::string& folder, const json& m) {
  json params = json::array();
  for (const auto& p : m["params"])
    params.push_back({{"name", p["name"]}, {"shape", p["shape"]}, {"numel", numel_of(p["shape"])}});
  json buffers = json::array();
  const int world = m["world_size"];
  for (size_t b = 0; b < m["buffers"].size(); ++b) {
    const json& buf = m["buffers"][b];
    json members = json::array();
    for (const auto& s : buf["params"]) {
      const size_t i = s[0];
      if (i < params.size()) params[i].update({{"buffer", b}, {"offset", s[1]}});
      members.push_back(i);
    }
    buffers.push_back({{"numel", buf["numel"]},
                       {"padded", buf["padded"]},
                       {"shard", buf["padded"].get<int64_t>() / world},
                       {"params", members}});
  }
  json states = json::array();  // the tensors saved for buffer 0, in file order
  for (const auto& [key, e] : m["entries"].items())
    if (key.rfind("b0.", 0) == 0)
      states.push_back({{"name", key.substr(3)}, {"dtype", e["dtype"]}, {"offset", e["offset"]}});
  std::sort(states.begin(), states.end(), [](const json& a, const json& b) { return a["offset"] < b["offset"]; });
  for (auto& s : states) s.erase("offset");
  return {{"path", folder},
          {"tag", m.value("tag", "")},
          {"format", m["format"]},
          {"step", m.value("step", int64_t(0))},
          {"world_size", world},
          {"stage", m["stage"]},
          {"dtype", m["dtype"]},
          {"optimizer", m.value("optimizer", "")},
          {"counters", m["counters"]},
          {"params", params},
          {"buffers", buffers},
          {"states", states},
          {"shards", m["shards"]},
          {"extra", m.value("extra", json::object())}};
}

void print_table(const json& d) {
  std::printf("checkpoint %s\n", d["path"].get<std::string>().c_str());
  std::printf("  tag %s | format %d | step %lld | world %d | stage %d | dtype %s | optimizer %s\n",
              d["tag"].get<std::string>().c_str(), d["format"].get<int>(), (long long)d["step"].get<int64_t>(),
              d["world_size"].get<int>(), d["stage"].get<int>(), d["dtype"].get<std::string>().c_str(),
              d["optimizer"].get<std::string>().c_str());
  std::printf("  counters %s\n", d["counters"].dump().c_str());
  int64_t total = 0;
  size_t w = 4;
  for (const auto& p : d["params"]) {
    total += p["numel"].get<int64_t>();
    w = std::max(w, p["name"].get<std::string>().size());
  }
  std::printf("\nparameters: %zu, %lld elements\n", d["params"].size(), (long long)total);
  std::printf("  %4s  %-*s  %-16s  %12s  %6s  %12s\n", "#", int(w), "NAME", "SHAPE", "NUMEL", "BUFFER", "OFFSET");
  for (size_t i = 0; i < d["params"].size(); ++i) {
    const json& p = d["params"][i];
    std::printf("  %4zu  %-*s  %-16s  %12lld  %6lld  %12lld\n", i, int(w), p["name"].get<std::string>().c_str(),
                p["shape"].dump().c_str(), (long long)p["numel"].get<int64_t>(), (long long)p.value("buffer", -1),
                (long long)p.value("offset", -1));
  }
  std::printf("\nbuffers: %zu (each rank's file holds 1/%d of every one)\n", d["buffers"].size(),
              d["world_size"].get<int>());
  std::printf("  %4s  %12s  %12s  %12s  %s\n", "#", "NUMEL", "PADDED", "PER RANK", "PARAMETERS");
  for (size_t b = 0; b < d["buffers"].size(); ++b) {
    const json& buf = d["buffers"][b];
    std::printf("  %4zu  %12lld  %12lld  %12lld  %s\n", b, (long long)buf["numel"].get<int64_t>(),
                (long long)buf["padded"].get<int64_t>(), (long long)buf["shard"].get<int64_t>(),
                buf["params"].dump().c_str());
  }
  std::printf("\nstates per buffer:");
  for (const auto& s : d["states"])
    std::printf(" %s (%s)", s["name"].get<std::string>().c_str(), s["dtype"].get<std::string>().c_str());
  std::printf("\n\nshard files:\n  %-16s  %14s  %s\n", "FILE", "BYTES", "XXH64");
  for (const auto& s : d["shards"])
    std::printf("  %-16s  %14llu  %s\n", s["file"].get<std::string>().c_str(),
                (unsigned long long)s["bytes"].get<uint64_t>(), s["xxh64"].get<std::string>().c_str());
  json extra = d["extra"];
  std::string note;
  if (extra.contains("config")) {  // long; --json shows it
    note = " (config: " + std::to_string(extra["config"].size()) + " keys, shown with --json)";
    extra.erase("config");
  }
  std::printf("\nextra %s%s\n", extra.dump().c_str(), note.c_str());
}

}  // namespace

int run_ckpt_inspect(const CkptToolOptions& o) {
  const std::string folder = checkpoint_folder(o.path, o.tag);
  const json d = describe(folder, ckpt::read_metadata(folder));
  if (o.json)
    std::printf("%s\n", d.dump().c_str());
  else
    print_table(d);
  return 0;
}

}  // namespace zt::apps
