#!/usr/bin/env bash
# A build's output without its progress lines (make's "[ 45%] ...", ninja's "[12/180] ..."): what is
# left is the compiler's. Ninja prints compiler errors on stdout, so builds pipe through this
# instead of discarding stdout. Usage: cmake --build ... | scripts/without_progress.sh
grep -Ev '^(\[ *[0-9]+(%|/[0-9]+)\] |Consolidate compiler generated dependencies)' || true
