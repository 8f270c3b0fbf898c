// The checkpoint tools of the command line: export (streamed consolidation to safetensors),
// import (safetensors -> a step-0 checkpoint of the configured engine), ckpt ls | verify.
// ckpt inspect is in ckpt_inspect.cpp.
#include "ckpt_commands.h"

#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>

#include "models/hf.h"
#include "run_dir.h"
#include "session.h"
#include "train_common.h"
#include "zt/ckpt/checkpoint.h"
#include "zt/ckpt/export.h"
#include "zt/ckpt/hf_folder.h"
#include "zt/ckpt/metadata.h"
#include "zt/core/allocator.h"
#include "zt/core/error.h"
#include "zt/core/strings.h"

namespace zt::apps {

namespace fs = std::filesystem;
using nlohmann::json;

int run_ckpt_inspect(const CkptToolOptions& o);  // ckpt_inspect.cpp
std::string checkpoint_folder(const std::string& path, const std::string& tag);

CLI::App* add_ckpt_commands(CLI::App& app, CkptToolOptions& o) {
  CLI::App* ex = app.add_subcommand("export", "Consolidated weights of a checkpoint as one safetensors file, streamed");
  ex->add_option("checkpoint", o.path, "a checkpoint folder, or a checkpoint.dir (its latest unless --tag)")
      ->required()
      ->type_name("CKPT");
  ex->add_option("--out", o.out, "the safetensors file to write (--format hf: the folder)")
      ->required()
      ->type_name("FILE|DIR");
  ex->add_option("--format", o.format,
                 "safetensors (one file, the model's names) or hf (a Hugging Face folder: config.json, "
                 "model.safetensors, generation_config.json; default safetensors)")
      ->check(CLI::IsMember({"safetensors", "hf"}))
      ->type_name("safetensors|hf");
  ex->add_option("--max-shard-size", o.max_shard_size,
                 "--format hf: shards of at most this size, e.g. 5GB (default), 200MB, 1000000 bytes")
      ->type_name("SIZE");
  ex->add_option("--tag", o.tag, "the tag inside a checkpoint.dir (default: latest)")->type_name("TAG");
  ex->add_option("--dtype", o.dtype, "dtype of the written tensors (default f32)")
      ->check(CLI::IsMember({"f32", "bf16", "f16"}))
      ->type_name("f32|bf16|f16");
  ex->add_flag("--json", o.json, "print the statistics (sizes, seconds, peak memory) as one JSON line");
  ex->add_flag("--force", o.force, "replace an existing --out file");

  CLI::App* im = app.add_subcommand(
      "import", "Start training from safetensors weights: saves a step-0 checkpoint of the configured run");
  im->add_option("weights", o.path, "safetensors named as the model's parameters, or a Hugging Face folder")
      ->required()
      ->type_name("FILE|DIR");
  im->add_option("--out", o.out, "the checkpoint.dir to save into")->required()->type_name("DIR");
  im->add_option("--tag", o.tag, "the tag of the saved checkpoint (default: step_00000000)")->type_name("TAG");
  im->add_flag("--force", o.force,
               "replace a checkpoint of the same tag, and move `latest` of a checkpoint.dir that already has one");

  CLI::App* ck = app.add_subcommand("ckpt", "Checkpoint folders: ls, verify, inspect");
  ck->require_subcommand(1);
  CLI::App* ls = ck->add_subcommand("ls", "Tags in a checkpoint.dir with step, world size, stage; * marks latest");
  CLI::App* verify =
      ck->add_subcommand("verify", "Check every shard file's size and checksum; exit 1 naming a bad file");
  CLI::App* inspect = ck->add_subcommand("inspect", "Layout and state of a checkpoint: parameters, buffers, counters");
  for (CLI::App* sub : {ls, verify, inspect}) {
    sub->add_option("dir", o.path, "a checkpoint.dir, or one checkpoint folder")->required()->type_name("DIR");
    sub->callback([&o, sub] { o.action = sub->get_name(); });
  }
  ls->add_flag("--json", o.json, "one JSON array on stdout");
  verify->add_flag("--json", o.json, "one JSON array on stdout: per checkpoint, whether it is ok, or its error");
  inspect->add_option("--tag", o.tag, "the tag inside DIR (default: latest)")->type_name("TAG");
  inspect->add_flag("--json", o.json, "one JSON object on stdout");
  return im;
}

bool is_ckpt_tool(const std::string& command) { return command == "export" || command == "ckpt"; }

// A folder with metadata.json is the checkpoint; else a checkpoint.dir and a tag (or latest).
std::string checkpoint_folder(const std::string& path, const std::string& tag) {
  if (tag.empty() && fs::exists(fs::path(path) / "metadata.json")) return path;
  ZT_CHECK_AS(ErrorKind::checkpoint, fs::is_directory(path), "[ckpt] ", path, " is not a folder");
  return ckpt::resolve_checkpoint(path, tag.empty() ? "latest" : tag);
}

namespace {

// "5GB", "200MB", "10KiB", "1000": transformers' max_shard_size (decimal units; KiB.. binary).
uint64_t shard_bytes(const std::string& text) {
  size_t end = 0;
  double v = 0;
  try {
    v = std::stod(text, &end);
  } catch (const std::exception&) {
    end = 0;
  }
  std::string unit = text.substr(end);
  for (char& ch : unit) ch = char(std::toupper(static_cast<unsigned char>(ch)));
  const std::map<std::string, double> units = {{"", 1},         {"B", 1},         {"KB", 1e3},
                                               {"MB", 1e6},     {"GB", 1e9},      {"TB", 1e12},
                                               {"KIB", 1024.0}, {"MIB", 1048576.0}, {"GIB", 1073741824.0}};
  const auto it = units.find(unit);
  ZT_CHECK_AS(ErrorKind::config, end > 0 && it != units.end() && v * it->second >= 1 && v * it->second < 1e18,
              "[export] --max-shard-size '", text, "' is not a size (e.g. 5GB, 200MB, 1000000)");
  return uint64_t(v * it->second);
}

// export --format hf: the checkpoint's saved config gives the model and its mapping (models/hf.h).
int run_export_hf(const CkptToolOptions& o) {
  const std::string folder = checkpoint_folder(o.path, o.tag);
  const json meta = ckpt::read_metadata(folder);
  ZT_CHECK_AS(ErrorKind::checkpoint, meta.contains("extra") && meta["extra"].contains("config"), "[export] ", folder,
              " records no config (extra.config of metadata.json), which --format hf needs to name the model");
  const config::Config cfg = config::parse(meta["extra"]["config"], folder + "/metadata.json (extra.config)");
  std::error_code ec;
  for (const char* f : {"config.json", "model.safetensors", "model.safetensors.index.json"})
    ZT_CHECK_AS(ErrorKind::config, o.force || !fs::exists(fs::path(o.out) / f, ec), "[export] ", o.out, "/", f,
                " already exists: pass --force to replace the folder's files, or choose another --out");
  ZT_CHECK_AS(ErrorKind::config, !fs::exists(o.out, ec) || fs::is_directory(o.out, ec), "[export] --out ", o.out,
              " is not a folder (--format hf writes one)");
  const auto t0 = std::chrono::steady_clock::now();
  const auto model = build_model(cfg, /*deferred=*/true);  // names and shapes only
  ckpt::HfExportOptions eo;
  eo.dtype = dtype_from_name(o.dtype);
  eo.max_shard_bytes = shard_bytes(o.max_shard_size);
  const std::vector<std::string> files = ckpt::export_hf_folder(folder, o.out, hf_mapping(cfg, param_shapes(*model)), eo);
  write_hf_config(cfg, o.out, eo.dtype);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (o.json)
    std::printf("%s\n", json({{"bench", "export"}, {"format", "hf"}, {"checkpoint", folder}, {"out", o.out},
                              {"dtype", o.dtype}, {"files", files}, {"seconds", s}})
                            .dump()
                            .c_str());
  std::fprintf(stderr, "zerotrain: exported %s (model.type %s, %s) to the Hugging Face folder %s: %zu weight file%s in %.2f s\n",
               folder.c_str(), cfg.model.type.c_str(), o.dtype.c_str(), o.out.c_str(),
               files.size() - (files.size() > 1 ? 1 : 0), files.size() > 1 ? "s and the index" : "", s);
  return 0;
}

double max_rss_bytes() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_maxrss) * 1024.0;  // KiB on Linux
}

int run_export(const CkptToolOptions& o) {
  if (o.format == "hf") return run_export_hf(o);
  // As import, nothing is replaced without --force; a FIFO or folder there is refused by the export.
  std::error_code ec;
  ZT_CHECK_AS(ErrorKind::config, o.force || !fs::is_regular_file(fs::status(o.out, ec)), "[export] ", o.out,
              " already exists: pass --force to replace it, or choose another --out");
  const std::string folder = checkpoint_folder(o.path, o.tag);
  Allocator& a = Allocator::global();
  a.reset_peaks();
  const size_t before = a.stats().total_current;
  const auto t0 = std::chrono::steady_clock::now();
  ckpt::ExportOptions eo;
  eo.dtype = dtype_from_name(o.dtype);
  const ckpt::ExportStats st = ckpt::export_safetensors(folder, o.out, eo);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const size_t peak = a.stats().total_peak - before;
  if (o.json) {
    const json j = {{"bench", "export"},
                    {"checkpoint", folder},
                    {"out", o.out},
                    {"dtype", o.dtype},
                    {"tensors", st.tensors},
                    {"file_bytes", st.file_bytes},
                    {"largest_buffer_bytes", st.largest_buffer_bytes},
                    {"seconds", s},
                    {"gb_per_s", double(st.file_bytes) / s / 1e9},
                    {"alloc_peak_bytes", peak},
                    {"max_rss_bytes", max_rss_bytes()}};
    std::printf("%s\n", j.dump().c_str());
  }
  std::fprintf(stderr,
               "zerotrain: exported %lld tensors (%s, %s) from %s to %s in %.2f s; peak memory %s in buffers "
               "(largest checkpoint buffer %s), %s resident\n",
               (long long)st.tensors, format_bytes(st.file_bytes).c_str(), o.dtype.c_str(), folder.c_str(),
               o.out.c_str(), s, format_bytes(peak).c_str(), format_bytes(st.largest_buffer_bytes).c_str(),
               format_bytes(size_t(max_rss_bytes())).c_str());
  return 0;
}

std::string latest_tag(const std::string& dir) {
  try {
    return fs::path(ckpt::resolve_checkpoint(dir, "latest")).filename().string();
  } catch (const Error&) {
    return "";
  }
}

int run_ls(const CkptToolOptions& o) {
  ZT_CHECK_AS(ErrorKind::checkpoint, fs::is_directory(o.path), "[ckpt] ", o.path, " is not a folder");
  const std::string latest = latest_tag(o.path);
  json rows = json::array();
  for (const std::string& tag : ckpt::list_checkpoints(o.path)) {
    const json m = ckpt::read_metadata((fs::path(o.path) / tag).string());
    rows.push_back({{"tag", tag},
                    {"step", m.value("step", int64_t(0))},
                    {"world_size", m["world_size"]},
                    {"stage", m["stage"]},
                    {"dtype", m["dtype"]},
                    {"latest", tag == latest}});
  }
  if (o.json) {
    std::printf("%s\n", rows.dump().c_str());
    return 0;
  }
  if (rows.empty()) {
    std::printf("no checkpoints in %s\n", o.path.c_str());
    return 0;
  }
  size_t w = 3;
  for (const auto& r : rows) w = std::max(w, r["tag"].get<std::string>().size());
  std::printf("%-*s  %10s  %5s  %5s  %5s  %s\n", int(w), "TAG", "STEP", "WORLD", "STAGE", "DTYPE", "LATEST");
  for (const auto& r : rows)
    std::printf("%-*s  %10lld  %5d  %5d  %5s  %s\n", int(w), r["tag"].get<std::string>().c_str(),
                (long long)r["step"].get<int64_t>(), r["world_size"].get<int>(), r["stage"].get<int>(),
                r["dtype"].get<std::string>().c_str(), r["latest"].get<bool>() ? "*" : "");
  return 0;
}

// Every checkpoint folder in DIR (or DIR itself): each line says ok or why not; exit 1 if any failed.
int run_verify(const CkptToolOptions& o) {
  std::vector<std::string> folders;
  if (fs::exists(fs::path(o.path) / "metadata.json")) {
    folders.push_back(o.path);
  } else {
    ZT_CHECK_AS(ErrorKind::checkpoint, fs::is_directory(o.path), "[ckpt] ", o.path, " is not a folder");
    for (const auto& d : fs::directory_iterator(o.path)) {
      const std::string name = d.path().filename().string();
      if (d.is_directory() && fs::exists(d.path() / "metadata.json") && name.find(".partial") == std::string::npos)
        folders.push_back(d.path().string());
    }
    std::sort(folders.begin(), folders.end());
    ZT_CHECK_AS(ErrorKind::checkpoint, !folders.empty(), "[ckpt] no checkpoint in ", o.path);
    std::error_code ec;
    if (fs::exists(fs::symlink_status(fs::path(o.path) / "latest", ec))) {
      const std::string latest = ckpt::resolve_checkpoint(o.path, "latest");  // a readable, valid tag
      ZT_CHECK_AS(ErrorKind::checkpoint, fs::is_directory(latest), "[ckpt] ", (fs::path(o.path) / "latest").string(),
                  " names '", fs::path(latest).filename().string(), "', which is not a checkpoint here");
    }
  }
  std::string first_error;
  int bad = 0;
  json rows = json::array();
  for (const std::string& f : folders) {
    try {
      ckpt::verify_checkpoint(f);
      const json m = ckpt::read_metadata(f);
      uint64_t bytes = 0;
      for (const auto& s : m["shards"]) bytes += s["bytes"].get<uint64_t>();
      rows.push_back({{"checkpoint", f}, {"ok", true}, {"shard_files", m["shards"].size()}, {"bytes", bytes}});
      if (!o.json)
        std::printf("ok      %s (%zu shard files, %s)\n", f.c_str(), m["shards"].size(), format_bytes(bytes).c_str());
    } catch (const Error& e) {
      rows.push_back({{"checkpoint", f}, {"ok", false}, {"error", e.what()}});
      if (!o.json) std::printf("FAILED  %s: %s\n", f.c_str(), e.what());
      if (bad++ == 0) first_error = e.what();
    }
  }
  if (o.json) std::printf("%s\n", rows.dump().c_str());  // the failure, if any, still goes to stderr
  std::fflush(stdout);
  ZT_CHECK_AS(ErrorKind::checkpoint, bad == 0, "[ckpt] ", bad, " of ", folders.size(),
              " checkpoints failed verification; ", first_error);
  return 0;
}

}  // namespace

int run_ckpt_tool(const std::string& command, const CkptToolOptions& o) {
  if (command == "export") return run_export(o);
  if (o.action == "ls") return run_ls(o);
  if (o.action == "verify") return run_verify(o);
  return run_ckpt_inspect(o);
}

// Before anything is built: the same answer on every rank (one shared checkpoint.dir), so a config error.
void check_import_target(const std::string& dir, const std::string& tag, bool force) {
  ZT_CHECK_AS(ErrorKind::config, ckpt::valid_tag(tag), "[import] --tag '", printable(tag),
              "' is not a checkpoint tag (1 to 128 letters, digits, '.', '_', '+' or '-', not starting with '.', "
              "not 'latest')");
  if (force) return;
  std::error_code ec;
  ZT_CHECK_AS(ErrorKind::config, !fs::exists(fs::symlink_status(fs::path(dir) / tag, ec)), "[import] ", dir, "/", tag,
              " already exists: pass --force to replace it, or choose another --tag");
  const fs::path latest = fs::path(dir) / "latest";
  ZT_CHECK_AS(ErrorKind::config, !fs::exists(fs::symlink_status(latest, ec)), "[import] ", dir,
              " already holds checkpoints (", latest.string(),
              "); importing would move `latest` back to step 0: pass --force, or import into another folder");
}

int run_import(const config::Config& cfg, comm::Group& group, const CkptToolOptions& o) {
  const std::string tag = o.tag.empty() ? "step_00000000" : o.tag;
  check_import_target(o.out, tag, o.force);
  group.set_timeout(cfg.run.comm_timeout_s);
  group.set_check_collectives(cfg.run.check_collectives);
  // The folder's lock, as a training run takes it: --force replaces checkpoints, never under a
  // run that is writing them (rank 0 holds it; every rank learns whether it could).
  LeadWork on_lead(group.rank() == 0);
  std::unique_ptr<DirLock> lock;
  on_lead([&] { lock = std::make_unique<DirLock>(o.out, "--out", ErrorKind::checkpoint, "[import]"); });
  stop_if_voted(agree(group, {0, -1, on_lead.failed()}, "import: --out locked"), on_lead, "before importing", o.out,
                false);
  const config::BatchSizes bs = config::resolve_batch(cfg, group.size());
  auto model = build_model(cfg, /*deferred=*/true);
  const ParamShapes shapes = param_shapes(*model);
  zero::Engine engine(*model, std::shared_ptr<comm::Group>(&group, [](comm::Group*) {}), engine_options(cfg, bs));
  ckpt::ImportReport rep;
  if (ckpt::is_hf_folder(o.path)) {  // through the entry's mapping; every rank checks the same folder
    // A failure one rank alone meets (an I/O error) is every rank's, or the others would wait.
    std::unique_ptr<ckpt::HfFolder> f;
    ckpt::HfMapping m;
    ckpt::HfMatch match;
    std::string error;
    ErrorKind kind = ErrorKind::checkpoint;
    try {
      f = std::make_unique<ckpt::HfFolder>(o.path);
      m = hf_mapping(cfg, shapes, f->tensor_names());
      match = check_hf_folder(*f, m, cfg.model.init_strict, group.rank() == 0);
    } catch (const Error& e) {
      error = e.what();
      kind = e.kind();
    }
    comm::agree_on_error(group, error, "import: the Hugging Face folder checked", kind);
    rep.tensors = ckpt::import_hf_folder(engine, *f, m, match.usable);
  } else {
    rep = ckpt::import_safetensors(engine, o.path);
    ZT_CHECK_AS(ErrorKind::config, rep.unused.empty() || !cfg.model.init_strict, "[import] ", o.path,
                " does not fit the model: unused: ", join(rep.unused), " (model.init_strict=false imports what fits and names the rest)");
  }
  const json extra = {{"step", 0}, {"imported_from", fs::absolute(o.path).string()}, {"config", cfg.raw}};
  ckpt::SaveOptions save{o.out, tag, 0, extra};
  save.keep_existing = !o.force;  // again at the commit: something may have appeared meanwhile
  const std::string saved = ckpt::save_checkpoint(engine, save);
  if (group.rank() == 0) {
    if (!rep.unused.empty())
      std::fprintf(stderr, "zerotrain: %zu tensors of %s are no parameter of the model, first '%s'; not imported\n",
                   rep.unused.size(), o.path.c_str(), rep.unused.front().c_str());
    std::fprintf(stderr,
                 "zerotrain: imported %lld parameters from %s; step-0 checkpoint %s (world %d, stage %d, %s); "
                 "train from it with checkpoint.dir=%s run.resume=latest\n",
                 (long long)rep.tensors, o.path.c_str(), saved.c_str(), group.size(), cfg.zero.stage,
                 dtype_name(engine.policy().param_dtype), o.out.c_str());
  }
  return 0;
}

}  // namespace zt::apps
