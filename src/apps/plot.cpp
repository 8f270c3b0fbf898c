// `zerotrain plot RUN_DIR`: the run's train and validation loss against step, drawn by gnuplot
// (Debian gnuplot-nox) into a PNG that appears whole or not at all (Note [atomic files]).
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "commands.h"
#include "loss_curves.h"
#include "zt/core/atomic_file.h"
#include "zt/core/error.h"

extern char** environ;

namespace zt::apps {

namespace {

// A temporary file in the system's temporary folder, removed when this goes out of scope.
struct ScratchFile {
  explicit ScratchFile(const char* suffix) {
    const char* tmp = std::getenv("TMPDIR");
    path = std::string(tmp && *tmp ? tmp : "/tmp") + "/zerotrain_plot_XXXXXX" + suffix;
    const int fd = ::mkstemps(path.data(), int(std::strlen(suffix)));
    ZT_CHECK_AS(ErrorKind::data, fd >= 0, "[plot] cannot create a temporary file ", path, " (", std::strerror(errno),
                ")");
    ::close(fd);
  }
  ~ScratchFile() { std::remove(path.c_str()); }
  ScratchFile(const ScratchFile&) = delete;
  ScratchFile& operator=(const ScratchFile&) = delete;
  std::string path;
};

// gnuplot's single-quoted strings: a quote is doubled; a line break cannot be written at all.
std::string quoted(const std::string& s) {
  ZT_CHECK(s.find_first_of("\n\r") == std::string::npos, "[plot] the path '", s, "' holds a line break");
  std::string out = "'";
  for (char c : s) out += c == '\'' ? "''" : std::string(1, c);
  return out + "'";
}

void datablock(std::ostream& os, const char* name, const std::vector<LossPoint>& curve) {
  os << "$" << name << " << EOD\n";
  char buf[64];
  for (const LossPoint& p : curve) {
    std::snprintf(buf, sizeof buf, "%lld %.9g\n", (long long)p.step, p.loss);
    os << buf;
  }
  os << "EOD\n";
}

std::string script(const LossCurves& c, const std::string& png, const std::string& title) {
  std::ostringstream s;
  // pngcairo where this gnuplot has it (gnuplot-nox does), else libgd's png.
  s << "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) { set terminal pngcairo size 1000,600 } "
       "else { set terminal png size 1000,600 }\n"
    << "set output " << quoted(png) << "\n"
    << "set title " << quoted(title) << " noenhanced\n"
    << "set xlabel 'step'\nset ylabel 'loss (nats)'\nset grid\nset key top right\n";
  std::string plots;
  // A single point makes no line, so short curves get points as well.
  auto style = [](size_t n) { return n < 2 ? "points pt 7" : n < 40 ? "linespoints pt 7 ps 0.6" : "lines"; };
  if (!c.train.empty()) {
    datablock(s, "train", c.train);
    plots += std::string("$train using 1:2 with ") + style(c.train.size()) + " lw 2 title 'train'";
  }
  if (!c.val.empty()) {
    datablock(s, "val", c.val);
    plots += std::string(plots.empty() ? "" : ", ") + "$val using 1:2 with " + style(c.val.size()) +
             " lw 2 title 'validation'";
  }
  s << "plot " << plots << "\n";
  return s.str();
}

// The last non-empty line of gnuplot's output (its error message comes last).
std::string last_line(const std::string& path) {
  std::ifstream f(path);
  std::string line, last;
  while (std::getline(f, line))
    if (line.find_first_not_of(" \t\r^") != std::string::npos) last = line;
  return last;
}

// Runs `gnuplot script` with its output in `log`; returns its wait status.
int run_gnuplot(const std::string& script_path, const std::string& log) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, log.c_str(), O_WRONLY | O_TRUNC, 0);
  posix_spawn_file_actions_adddup2(&fa, STDOUT_FILENO, STDERR_FILENO);
  std::string prog = "gnuplot";
  char* argv[] = {prog.data(), const_cast<char*>(script_path.c_str()), nullptr};
  pid_t pid = -1;
  const int err = posix_spawnp(&pid, "gnuplot", &fa, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  ZT_CHECK_AS(ErrorKind::config, err != ENOENT,
              "[plot] gnuplot is not installed (not found on PATH); install the Debian package gnuplot-nox "
              "(apt-get install gnuplot-nox, or scripts/setup.sh)");
  ZT_CHECK_AS(ErrorKind::config, err == 0, "[plot] cannot start gnuplot: ", std::strerror(err));
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    ZT_CHECK_AS(ErrorKind::internal, errno == EINTR, "[plot] waiting for gnuplot failed: ", std::strerror(errno));
  return status;
}

bool is_png(const std::string& path) {
  static const char magic[8] = {'\x89', 'P', 'N', 'G', '\r', '\n', '\x1a', '\n'};
  char head[8] = {};
  std::ifstream f(path, std::ios::binary);
  return f.read(head, 8) && std::memcmp(head, magic, 8) == 0;
}

}  // namespace

int run_plot(const PlotOptions& opt) {
  const std::string metrics = opt.run_dir + "/metrics.jsonl";
  const std::string out = opt.out.empty() ? opt.run_dir + "/loss.png" : opt.out;
  const LossCurves c = read_loss_curves(metrics);
  ZT_CHECK_AS(ErrorKind::data, !c.train.empty() || !c.val.empty(), "[plot] ", metrics,
              " has no loss records (lines with \"step\" and \"loss\" or \"val_loss\"; train writes one every "
              "steps_per_print steps)");
  if (c.skipped_lines > 0)
    std::fprintf(stderr, "zerotrain: plot: skipped %lld line%s of %s that are not JSON objects\n",
                 (long long)c.skipped_lines, c.skipped_lines == 1 ? "" : "s", metrics.c_str());

  AtomicFile png(out, ErrorKind::data, "[plot]");  // gnuplot writes the temporary; commit renames it
  ScratchFile gp(".gp"), log(".log");
  {
    std::ofstream f(gp.path);
    f << script(c, png.temp_path(), opt.run_dir);
    ZT_CHECK_AS(ErrorKind::data, f.flush().good(), "[plot] cannot write ", gp.path);
  }
  const int status = run_gnuplot(gp.path, log.path);
  ZT_CHECK_AS(ErrorKind::internal, WIFEXITED(status) && WEXITSTATUS(status) == 0, "[plot] gnuplot failed (",
              WIFEXITED(status) ? "exit status " + std::to_string(WEXITSTATUS(status))
                                : "signal " + std::to_string(WTERMSIG(status)),
              "): ", last_line(log.path));
  const std::string said = last_line(log.path);
  ZT_CHECK_AS(ErrorKind::internal, is_png(png.temp_path()), "[plot] gnuplot wrote no PNG",
              said.empty() ? "" : " (" + said + ")");
  png.commit();
  sync_dir(folder_of(out), ErrorKind::data, "[plot]");
  std::printf("loss curve: %s (%zu train, %zu validation points", out.c_str(), c.train.size(), c.val.size());
  if (c.runs > 1) std::printf("; %lld runs, each later one replacing the steps it repeats", (long long)c.runs);
  std::printf(")\n");
  return 0;
}

}  // namespace zt::apps
