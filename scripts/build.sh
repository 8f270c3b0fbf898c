#!/usr/bin/env bash
# Configures and builds zerotrain into build/ (Release). Usage: scripts/build.sh [BUILD_DIR [cmake args...]]
# ZT_BUILD_TARGET="NAME [NAME...]" builds only those targets (scripts/run.sh: the zerotrain binary, not every test).
set -euo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${1:-$repo_root/build}"
shift || true
# Ninja where installed (scripts/setup.sh installs it): new build folders only, an existing one keeps its generator.
if [[ -z "${CMAKE_GENERATOR:-}" ]] && command -v ninja >/dev/null; then export CMAKE_GENERATOR=Ninja; fi
if [[ ! -f "$build_dir/CMakeCache.txt" ]]; then
  cmake -S "$repo_root" -B "$build_dir" -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
fi
# shellcheck disable=SC2086 # several targets split on spaces
cmake --build "$build_dir" -j"$(nproc)" ${ZT_BUILD_TARGET:+--target $ZT_BUILD_TARGET} |
  "$repo_root/scripts/without_progress.sh"
