// The zerotrain command line (CLI11): train, eval, estimate, prepare, the checkpoint tools
// (export, import, ckpt), tokenize and the language-model tools (plot, baseline, generate), each
// with its own --help.
// Errors become one line on stderr and an exit status: 1 the run failed, 2 bad usage.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <new>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "ckpt_commands.h"
#include "commands.h"
#include "models/model_kind.h"
#include "prepare.h"
#include "zt/core/affinity.h"
#include "zt/core/device.h"
#include "zt/core/error.h"
#include "zt/core/strings.h"
#include "zt/data/ngram.h"
#include "zt/data/tokenizer.h"
#include "zt/ops/ops.h"

namespace {

using zt::ErrorKind;

constexpr const char* kVersion = "zerotrain 0.1.0";
constexpr const char* kCommands[] = {"train", "eval",     "estimate", "prepare",  "export",  "import",
                                     "ckpt",  "tokenize", "plot",     "baseline", "generate"};

constexpr const char* kOverridesFooter =
    "KEY=VALUE overrides any configuration key by its dotted path, e.g.\n"
    "  zero_optimization.stage=3 optimizer.params.lr=3e-4 run.dir=runs/try2";
constexpr const char* kTopOverridesFooter =
    "train, eval, estimate, import and generate take KEY=VALUE overrides of any configuration key by its\n"
    "dotted path, e.g. zero_optimization.stage=3 optimizer.params.lr=3e-4 run.dir=runs/try2";
constexpr const char* kExitFooter =
    "Exit status: 0 success, 1 the run failed (the error is printed on one line), 2 bad usage,\n"
    "143 (130) training stopped by SIGTERM (SIGINT); under mpirun, mpirun's own status is 1.";

struct Args {
  std::string config, weights;
  bool eval_json = false;  // eval --json
  std::vector<std::string> overrides;
  zt::apps::EstimateOptions estimate;
  zt::apps::CkptToolOptions tools;  // export, import, ckpt
  zt::apps::PrepareCliOptions prepare;
  zt::apps::TokenizeOptions tokenize;
  zt::apps::PlotOptions plot;
  zt::apps::BaselineOptions baseline;
  zt::apps::GenerateOptions generate;
  uint64_t seed = 0;  // generate --seed, when given
};

// Every command reads a configuration file, then key=value overrides.
void add_config_options(CLI::App& cmd, Args& a) {
  cmd.add_option("--config", a.config, "DeepSpeed-style JSON configuration")->required()->type_name("FILE");
  cmd.add_option("overrides", a.overrides, "configuration keys to override")->type_name("KEY=VALUE");
  cmd.allow_extras();  // unknown options are reported by check_leftovers, before a stray value
  cmd.footer(std::string(kOverridesFooter) + "\n\n" + kExitFooter);
}

// Accepts a T > 0; CLI11's Range would print the type's limits.
template <typename T>
CLI::Validator positive(const std::string& what) {
  return CLI::Validator(
      [what](std::string& s) -> std::string {
        T v{};
        return CLI::detail::lexical_cast(s, v) && v > 0 ? "" : "'" + s + "' is not " + what + " > 0";
      },
      "");
}

// Accepts a finite T >= 0.
template <typename T>
CLI::Validator non_negative(const std::string& what) {
  return CLI::Validator(
      [what](std::string& s) -> std::string {
        T v{};
        bool ok = CLI::detail::lexical_cast(s, v) && v >= 0;
        if constexpr (std::is_floating_point_v<T>) ok = ok && std::isfinite(v);
        return ok ? "" : "'" + s + "' is not " + what + " >= 0";
      },
      "");
}

// Accepts a plain whole number in [lo, hi]; from_chars fails past T's range where CLI11's own
// conversion saturated ("generate --tokens 99999999999999999999" ran without end).
template <typename T>
CLI::Validator integer_in(T lo, T hi) {
  return CLI::Validator(
      [lo, hi](std::string& s) -> std::string {
        T v{};
        const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        const bool ok = ec == std::errc() && end == s.data() + s.size() && v >= lo && v <= hi;
        return ok ? "" : "'" + s + "' is not an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
      },
      "");
}

// --memory-gib: finite, > 0, and its bytes fit in int64 (below 8 EiB).
CLI::Validator memory_gib_validator() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        double v = 0;
        const bool ok = CLI::detail::lexical_cast(s, v) && v > 0 && v < zt::apps::kMaxMemoryGib;
        return ok ? "" : "'" + s + "' is not a number > 0 (GiB, below 8589934592)";
      },
      "");
}

// plot, baseline, generate: the language-model tools.
void add_lm_commands(CLI::App& app, Args& a) {
  CLI::App* plot =
      app.add_subcommand("plot", "Draw a run's train and validation loss against step into a PNG (gnuplot)");
  plot->add_option("RUN_DIR", a.plot.run_dir, "the run's folder, holding metrics.jsonl")
      ->required()
      ->type_name("");  // the name says it: "RUN_DIR REQUIRED", not "RUN_DIR RUN_DIR REQUIRED"
  plot->add_option("--out", a.plot.out, "the PNG to write (default: RUN_DIR/loss.png)")->type_name("FILE");

  CLI::App* base = app.add_subcommand(
      "baseline", "Validation loss of unigram and bigram models on token shards; writes DIR/baseline.json");
  base->add_option("--data", a.baseline.data_dir, "folder of train_*.bin and val_*.bin token shards")
      ->required()
      ->type_name("DIR");
  base->add_option("--vocab", a.baseline.vocab_size, "vocabulary size (default 50257, GPT-2's)")
      ->type_name("V")
      ->check(CLI::Validator(
          [](std::string& s) -> std::string {
            int64_t v = 0;
            return CLI::detail::lexical_cast(s, v) && v >= 1 && v <= zt::data::kMaxNgramVocab
                       ? ""
                       : "'" + s + "' is not in [1, " + std::to_string(zt::data::kMaxNgramVocab) + "]";
          },
          ""));

  CLI::App* gen = app.add_subcommand("generate", "Sample text from trained GPT weights, printed as it comes");
  add_config_options(*gen, a);
  gen->add_option("--weights", a.generate.weights, "safetensors weights or a Hugging Face folder")
      ->required()
      ->type_name("FILE|DIR");
  gen->add_option("--prompt", a.generate.prompt, "text to continue (default: none, start after <|endoftext|>)")
      ->type_name("TEXT");
  gen->add_option("--tokens", a.generate.tokens, "new tokens to generate, at most 1000000 (default 100)")
      ->type_name("N")
      ->check(integer_in<int64_t>(0, zt::apps::kMaxGenerateTokens));
  gen->add_option("--temperature", a.generate.temperature, "softmax temperature; 0 = greedy (default 0.8)")
      ->type_name("T")
      ->check(non_negative<float>("a number"));
  gen->add_option("--top-k", a.generate.top_k, "sample among the K most likely tokens; 0 = all (default 200)")
      ->type_name("K")
      ->check(integer_in<int64_t>(0, std::numeric_limits<int64_t>::max()));
  gen->add_option("--seed", a.seed, "random seed, 0 to 2^64-1 (default: the configuration's seed)")
      ->type_name("S")
      ->check(integer_in<uint64_t>(0, std::numeric_limits<uint64_t>::max()));
  gen->add_option("--tokenizer", a.generate.tokenizer,
                  "gpt2, a tokenizer.json, a SentencePiece .model or a folder (default: the one beside the weights, "
                  "as a run folder and a Hugging Face folder keep it, else GPT-2's)")
      ->type_name("SPEC");
  gen->add_option("--tokenizer-dir", a.generate.tokenizer_dir, "GPT-2 encoder.json and vocab.bpe (default data/gpt2)")
      ->type_name("DIR");
}

void build_app(CLI::App& app, Args& a) {
  app.set_version_flag("--version", kVersion);
  app.require_subcommand(1);
  app.footer(kExitFooter);  // what each command inherits; add_config_options adds the overrides
  app.get_formatter()->column_width(34);

  CLI::App* train = app.add_subcommand("train", "Train; under mpirun -np N, on N ranks");
  add_config_options(*train, a);

  CLI::App* eval =
      app.add_subcommand("eval", "Evaluate saved weights: test accuracy, or validation loss of a language model");
  add_config_options(*eval, a);
  eval->add_option("--weights", a.weights,
                   "safetensors weights or a Hugging Face folder (default: <run.dir>/model.safetensors)")
      ->type_name("FILE|DIR");
  eval->add_flag("--json", a.eval_json, "print the scores as one JSON object (full precision) on stdout");

  CLI::App* est =
      app.add_subcommand("estimate", "Per-rank bytes of model states per stage, and the largest model that fits G GiB");
  add_config_options(*est, a);
  est->add_option("--world", a.estimate.world, "number of ranks to plan for")
      ->required()
      ->type_name("N")
      ->check(positive<int>("an integer"));
  est->add_option("--memory-gib", a.estimate.memory_gib, "also print the largest model whose states fit G GiB per rank")
      ->type_name("G")
      ->check(memory_gib_validator());
  est->add_flag("--json", a.estimate.json, "print one JSON object on stdout instead of the table");

  zt::apps::add_prepare_command(app, a.prepare);                      // no configuration
  add_config_options(*zt::apps::add_ckpt_commands(app, a.tools), a);  // import takes a configuration

  CLI::App* tok =
      app.add_subcommand("tokenize", "Token ids of the text on stdin, as a JSON array (--decode: the reverse)");
  tok->add_option("--tokenizer", a.tokenize.tokenizer,
                  "gpt2, bert, a tokenizer.json, a SentencePiece .model, or a folder holding one (or named in data/)")
      ->required()
      ->check(CLI::Validator(
          [](std::string& s) -> std::string {
            return zt::data::is_tokenizer_spec(s, "data")
                       ? ""
                       : s + " not in {gpt2,bert} and not a tokenizer.json, .model or tokenizer folder";
          },
          ""))
      ->type_name("gpt2|bert|FILE|DIR");
  tok->add_option("--dir", a.tokenize.dir, "gpt2's or bert's files (default: data/gpt2 or data/bert)")->type_name("D");
  tok->add_flag("--lines", a.tokenize.lines, "one array per input line instead of one for all of stdin");
  tok->add_flag("--decode", a.tokenize.decode,
                "stdin holds ids (separated by white space or commas, or JSON lists): print their text");
  add_lm_commands(app, a);
  app.footer(std::string(kTopOverridesFooter) + "\n\n" + kExitFooter);  // set last: no command inherits it
}

// "train, eval, ..., generate", for the messages that say which commands there are.
std::string command_list() {
  std::string out;
  for (const char* c : kCommands) out += std::string(out.empty() ? "" : ", ") + c;
  return out;
}

std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  return s;
}

int usage_error(const std::string& msg, const std::string& command) {
  const std::string help = command.empty() ? "zerotrain --help" : "zerotrain " + command + " --help";
  std::fprintf(stderr, "zerotrain: %s (see %s)\n", one_line(msg).c_str(), help.c_str());
  return 2;
}

// What CLI11 let through: unknown options, then overrides without '='.
int check_leftovers(const CLI::App& cmd, const Args& a) {
  const std::string name = cmd.get_name();
  if (const auto rest = cmd.remaining(); !rest.empty())
    return usage_error("unknown option '" + rest.front().substr(0, rest.front().find('=')) + "'", name);
  for (const std::string& o : a.overrides)
    if (o.find('=') == std::string::npos || o[0] == '=')
      return usage_error("'" + o + "' is not an override (they look like key=value)", name);
  return 0;
}

// This process's rank and the job's size before the group exists, from the launcher's
// environment (Open MPI, then MPICH/Hydra); 0 and 1 when not launched by one.
std::pair<int, int> launcher_rank_and_size() {
  for (auto [r, s] : {std::pair{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"}, std::pair{"PMI_RANK", "PMI_SIZE"}}) {
    const char* rank = std::getenv(r);
    const char* size = std::getenv(s);
    if (rank && size) return {std::atoi(rank), std::atoi(size)};
  }
  return {0, 1};
}

// Note [errors across ranks]: a config error is the same on every rank (all ranks read the same
// file and arguments, and validation is deterministic), so rank 0 alone says it and every rank
// exits 1 by itself. Any other kind may be one rank's alone (data can be node-local or a rank's
// own shard; a peer can vanish), so that rank says it with its number and ends the whole job,
// lest its peers wait in a collective for a rank that has left.
bool same_on_every_rank(ErrorKind k) { return k == ErrorKind::config; }

int run_failed(const std::string& what, ErrorKind kind, zt::comm::Group* group) {
  auto [rank, size] = group ? std::pair{group->rank(), group->size()} : launcher_rank_and_size();
  const bool many = size > 1, same = same_on_every_rank(kind);
  if (!many || rank == 0 || !same) {
    if (many && !same)
      std::fprintf(stderr, "zerotrain: error on rank %d: %s\n", rank, one_line(what).c_str());
    else
      std::fprintf(stderr, "zerotrain: error: %s\n", one_line(what).c_str());
    std::fflush(stderr);
  }
  if (group && many && !same) group->abort_job(1);
  return 1;
}

// Note [agreed stops]: every rank raised the same stop after a vote; rank 0 says it, nobody aborts.
int agreed_stop(const zt::AgreedError& e, zt::comm::Group* group) {
  if (!group || group->rank() == 0) {
    std::fprintf(stderr, "zerotrain: %s%s\n", e.interrupted() ? "" : "error: ", one_line(e.what()).c_str());
    std::fflush(stderr);
  }
  return e.exit_code();
}

int run_command(const std::string& command, const Args& a) {
  zt::comm::GroupPtr group;
  try {
    zt::ops::check_cpu_isa();  // Note [processor cap]: a cap oneDNN would ignore, said before any work
    if (zt::apps::is_ckpt_tool(command)) return zt::apps::run_ckpt_tool(command, a.tools);
    if (command == "prepare") return zt::apps::run_prepare(a.prepare);
    if (command == "tokenize") return zt::apps::run_tokenize(a.tokenize);
    if (command == "plot") return zt::apps::run_plot(a.plot);
    if (command == "baseline") return zt::apps::run_baseline(a.baseline);
    // Note [HF config]: a Hugging Face folder as the weights can give the model section.
    const std::string& weights = command == "eval"       ? a.weights
                                 : command == "generate" ? a.generate.weights
                                 : command == "import"   ? a.tools.path
                                                         : a.config.substr(0, 0);
    zt::config::Config cfg = zt::config::load(a.config, a.overrides, weights);
    // Note [model registry]: no model section used to train the MNIST MLP silently.
    if (!cfg.raw.contains("model")) {
      const std::string types = zt::join(zt::config::model_types());
      ZT_THROW_AS(ErrorKind::config, "[config] ", a.config, " has no 'model' section: set model.type (one of ", types,
                  ") and its keys, or give a Hugging Face model folder as the weights (model.init_from, import's "
                  "folder, or eval's and generate's --weights)");
    }
    if (command == "eval")
      return zt::apps::run_eval(cfg, a.weights.empty() ? cfg.run.dir + "/model.safetensors" : a.weights, a.eval_json);
    if (command == "estimate") return zt::apps::run_estimate(cfg, a.estimate);
    if (command == "generate") return zt::apps::run_generate(cfg, a.generate);
    // Under mpirun, "local" would make each rank train alone, all into one run.dir.
    const int launched = launcher_rank_and_size().second;
    ZT_CHECK_AS(ErrorKind::config, !(cfg.run.comm_backend == "local" && zt::comm::launched_by_mpirun() && launched > 1),
                "[config] run.comm_backend = local under mpirun with ", launched,
                " ranks would run that many separate trainings into one run.dir; use auto or mpi under mpirun, or "
                "local without it");
    // Note [backend choice]: nccl on GPUs with one a rank, shm or mpi on CPUs, mpi for the servers.
    zt::comm::BackendSetting setting{.requested = cfg.run.comm_backend, .under_mpirun = zt::comm::launched_by_mpirun()};
    setting.on_gpu = cfg.run.device.rfind("cuda", 0) == 0;
    setting.local_ranks = zt::local_rank_from_env().size;
    setting.gpus = zt::cuda_device_count();
    setting.nccl_built = zt::comm::nccl_available();
    setting.point_to_point = cfg.run.strategy == "parameter_server";
    const zt::comm::BackendChoice comm = zt::comm::choose_backend(setting);
    if (!comm.note.empty() && launcher_rank_and_size().first == 0)
      std::fprintf(stderr, "zerotrain: %s\n", comm.note.c_str());
    group = zt::comm::make_group(comm.backend);
    if (command == "import") return zt::apps::run_import(cfg, *group, a.tools);
    return zt::apps::run_train(cfg, *group);
  } catch (const zt::AgreedError& e) {
    return agreed_stop(e, group.get());
  } catch (const zt::Error& e) {
    return run_failed(e.what(), e.kind(), group.get());
  } catch (const std::bad_alloc&) {  // a last resort: sizes we know are checked before allocating
    return run_failed("out of memory: an allocation failed (std::bad_alloc)", ErrorKind::out_of_memory, group.get());
  } catch (const std::exception& e) {
    return run_failed(e.what(), ErrorKind::internal, group.get());
  }
}

}  // namespace

int main(int argc, char** argv) {
  zt::apps::register_model_types();  // Note [model registry]: model.type takes every entry's type
  CLI::App app("Data-parallel training with ZeRO stages 0-3 (DeepSpeed-style JSON configuration).", "zerotrain");
  Args a;
  build_app(app, a);
  if (argc < 2) {  // a bare `zerotrain` asks what there is: the help, but as a usage error that says so
    std::fprintf(stderr, "zerotrain: a command is required (%s)\n", command_list().c_str());
    std::fputs(app.help().c_str(), stderr);
    return 2;
  }
  // Before CLI11, whose messages for these would name a later problem instead.
  const std::string first = argv[1];
  const bool top_flag = first == "-h" || first == "--help" || first == "--version";
  if (first[0] == '-' && !top_flag)
    return usage_error("unknown option '" + first + "' before the command (options follow the command)", "");
  if (first[0] != '-' && std::find(std::begin(kCommands), std::end(kCommands), first) == std::end(kCommands))
    return usage_error("unknown command '" + first + "'; the commands are " + command_list(), "");
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {  // --help, --version
    return app.exit(e);              // CLI11's App::exit prints the text and returns the status; nothing exits here
  } catch (const CLI::ParseError& e) {
    const auto parsed = app.get_subcommands();
    return usage_error(e.what(), parsed.empty() ? "" : parsed.front()->get_name());
  }
  const CLI::App& cmd = *app.get_subcommands().front();
  if (int code = check_leftovers(cmd, a)) return code;
  if (cmd.get_name() == "generate" && cmd.count("--seed")) a.generate.seed = a.seed;
  return run_command(cmd.get_name(), a);
}
