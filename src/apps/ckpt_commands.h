#pragma once
// `zerotrain export`, `zerotrain import` and `zerotrain ckpt ls|verify|inspect`: checkpoint
// tools. main.cpp registers them with add_ckpt_commands and runs them like the others.
#include <string>

#include <CLI/CLI.hpp>

#include "zt/comm/group.h"
#include "zt/config/config.h"

namespace zt::apps {

struct CkptToolOptions {
  std::string action;         // ckpt: ls | verify | inspect
  std::string path;           // export, ckpt: a checkpoint folder or a checkpoint.dir; import: safetensors or an HF folder
  std::string out;            // export: the safetensors file; import: the checkpoint.dir to save into
  std::string tag;            // export, inspect: a tag inside DIR (default: latest); import: the tag saved
  std::string dtype = "f32";  // export
  std::string format = "safetensors";  // export: safetensors (one file) | hf (a Hugging Face folder at --out)
  std::string max_shard_size = "5GB";  // export --format hf: shards past this size (transformers' default)
  bool json = false;          // export, ckpt ls, verify, inspect: JSON on stdout
  bool force = false;         // import: replace a tag, move `latest`; export: replace an existing --out
};

// Adds export, import and ckpt to `app`; returns import, to which the caller adds --config and
// the overrides (its one positional, the file, comes first).
CLI::App* add_ckpt_commands(CLI::App& app, CkptToolOptions& o);
bool is_ckpt_tool(const std::string& command);  // export, ckpt: no configuration needed

int run_ckpt_tool(const std::string& command, const CkptToolOptions& o);
// Builds the configured model and engine on this process set, imports the file, saves a
// step-0 checkpoint that `train` resumes from (run.resume). Collective.
int run_import(const config::Config& cfg, comm::Group& group, const CkptToolOptions& o);

}  // namespace zt::apps
