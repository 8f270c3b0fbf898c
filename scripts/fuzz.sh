#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/, clang with ASan+UBSan, in build-fuzz/) and runs each for
# SECONDS (default 60) from its committed seeds (fuzz/corpus/<target>/, never written) and a
# working corpus that grows across runs (build-fuzz/corpus/<target>/).
# Usage: scripts/fuzz.sh [SECONDS] [TARGET...]  (default: every target with a seed folder)
# Env: ZT_FUZZ_DIR = build folder (default <repo>/build-fuzz); ZT_FUZZ_JOBS = targets at once (default nproc).
# A finding (crash, sanitizer report, leak, timeout, out of memory) stops with status 1 and
# names the reproducer, which `build-fuzz/fuzz/<target> FILE` replays.
set -euo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"

seconds="${1:-60}"
[[ "$seconds" =~ ^[0-9]+$ && "$seconds" -gt 0 ]] || { echo "[fuzz] SECONDS must be a positive integer, got '$seconds'" >&2; exit 2; }
shift || true
build="${ZT_FUZZ_DIR:-$repo_root/build-fuzz}"
if (($#)); then
  targets=("$@")
else
  targets=()
  for d in fuzz/corpus/*/; do targets+=("$(basename "$d")"); done
fi

command -v clang++ >/dev/null || { echo "[fuzz] clang++ not found (scripts/setup.sh installs it)" >&2; exit 1; }
if [[ ! -f "$build/CMakeCache.txt" ]]; then
  launcher=()
  command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  cmake -S . -B "$build" -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo -DZT_FUZZ=ON \
    -DZT_BUILD_TESTS=OFF -DZT_BUILD_BENCH=OFF "${launcher[@]}" >/dev/null
fi
cmake --build "$build" -j"$(nproc)" --target fuzzers |
  scripts/without_progress.sh

# The targets write each input to a scratch file: on tmpfs when there is one, removed at the end.
scratch_root=/dev/shm
[[ -d "$scratch_root" && -w "$scratch_root" ]] || scratch_root="$build"
export ZT_FUZZ_SCRATCH="$scratch_root/zt_fuzz_run_$$"
mkdir -p "$ZT_FUZZ_SCRATCH"
trap 'rm -rf "$ZT_FUZZ_SCRATCH"' EXIT

for t in "${targets[@]}"; do
  [[ -x "$build/fuzz/$t" && -d "fuzz/corpus/$t" ]] || { echo "[fuzz] unknown target '$t' (no $build/fuzz/$t or fuzz/corpus/$t)" >&2; exit 2; }
done

# One target for its SECONDS: 0, or 1 with the finding's log tail and reproducer on stderr.
run_target() {
  local t="$1" seeds="fuzz/corpus/$1" work="$build/corpus/$1" findings="$build/findings/$1" log="$build/logs/$1.log"
  mkdir -p "$work" "$findings" "$(dirname "$log")"
  # -timeout: one input taking 10 s is a hang; -rss_limit_mb: 2 GiB is an out-of-memory finding.
  if ! "$build/fuzz/$t" "$work" "$seeds" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
       -artifact_prefix="$findings/" -print_final_stats=1 >"$log" 2>&1; then
    tail -n 40 "$log" >&2
    echo "[fuzz] $t: FINDING after $(grep -c . "$log") log lines; reproducer: $(ls -t "$findings" | head -1 | sed "s|^|$findings/|")" >&2
    return 1
  fi
  local runs
  runs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")"
  echo "[fuzz] $t: ${runs:-?} executions in ${seconds} s, corpus $(find "$work" -type f | wc -l) files" \
       "($(du -sb "$work" | cut -f1) bytes), no finding"
}

# libFuzzer runs on one core: ZT_FUZZ_JOBS targets at once (default: the cores), each for its full
# SECONDS, so the whole pass takes targets/jobs times SECONDS. A finding stops new launches; the
# targets already running finish their time.
max_jobs="${ZT_FUZZ_JOBS:-$(nproc)}"
[[ "$max_jobs" =~ ^[0-9]+$ && "$max_jobs" -gt 0 ]] || { echo "[fuzz] ZT_FUZZ_JOBS must be a positive integer, got '$max_jobs'" >&2; exit 2; }
running=0 failed=0
for t in "${targets[@]}"; do
  run_target "$t" &
  running=$((running + 1))
  if ((running >= max_jobs)); then
    wait -n || failed=1
    running=$((running - 1))
  fi
  ((failed == 0)) || break
done
while ((running > 0)); do
  wait -n || failed=1
  running=$((running - 1))
done
exit "$failed"
