#!/usr/bin/env bash
# scripts/gpu_check.sh's arguments (issue 53, cases 11 and 12): an OUT_DIR that is a file or cannot
# be made, and a bundle that does not unpack, are one line on stderr and exit 1 before any check
# runs, writing nothing (at / neither); without a GPU, valid arguments are one line and exit 77.
# Needs no GPU and no bundle: a fake nvidia-smi stands in for the GPU where the bundle is looked at.
# ZT_GPU_CHECK_SCRIPT runs another copy (to see these cases fail on the script before issue 53).
set -uo pipefail
script="${ZT_GPU_CHECK_SCRIPT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/scripts/gpu_check.sh}"
tmp="$(mktemp -d)" || exit 1
trap 'rm -rf "$tmp"' EXIT
failed=0
fail() { echo "FAIL: $*"; failed=1; }
# What the check writes, at / (where the script before issue 53 put it with OUT_DIR refused).
at_root() { for f in checks.log summary.json summary.md bench.jsonl profile.md; do [[ -e /$f ]] && echo "/$f"; done; }
root_before="$(at_root)"
# The run's own folder (its $PWD), which must stay empty too.
mkdir "$tmp/cwd"
fake="$tmp/fakebin"
mkdir "$fake"
cat >"$fake/nvidia-smi" <<'SH'
#!/bin/sh
if [ "$1" = -L ]; then echo "GPU 0: Fake GPU (UUID: GPU-fake)"; else echo "Fake GPU, 0.0, 1 MiB, 9.0"; fi
SH
chmod +x "$fake/nvidia-smi"

# run NAME CODE SAYS PATH_PREFIX ARGS...: the script, with PATH_PREFIX (or none) first on PATH, exits
# CODE with one line of stderr saying SAYS, nothing on stdout, and nothing left at / or in its $PWD.
run() {
  local name=$1 code=$2 says=$3 prefix=$4 rc err t0=$SECONDS before=$failed
  failed=0
  shift 4
  (cd "$tmp/cwd" && PATH="${prefix:+$prefix:}$PATH" timeout 60 "$script" "$@" >"$tmp/stdout" 2>"$tmp/stderr")
  rc=$?
  err="$(cat "$tmp/stderr")"
  [[ $rc == "$code" ]] || fail "$name: exit $rc, not $code: $(head -c 600 "$tmp/stderr")"
  [[ $(grep -c . "$tmp/stderr") == 1 ]] || fail "$name: stderr is not one line: $(head -c 600 "$tmp/stderr")"
  [[ $err == *"$says"* ]] || fail "$name: said '$(head -c 600 "$tmp/stderr")', not '$says'"
  [[ -s $tmp/stdout ]] && fail "$name: printed on stdout: $(head -c 300 "$tmp/stdout")"
  local made
  made="$(find "$tmp/cwd" -mindepth 1 | tr '\n' ' ')"
  [[ -z $made ]] || fail "$name: wrote in its folder: $made"
  [[ $(at_root) == "$root_before" ]] || fail "$name: wrote at /: $(at_root | tr '\n' ' ')"
  ((SECONDS - t0 < 20)) || fail "$name: took $((SECONDS - t0)) s (checks ran?)"
  find "$tmp/cwd" -mindepth 1 -delete
  rm -f "$tmp/stdout" "$tmp/stderr"
  [[ $failed == 0 ]] && echo "ok: $name: exit $rc: $err"
  ((failed |= before))
}

# (a) OUT_DIR an existing file: without a GPU, and with one (OUT_DIR is looked at before the bundle).
echo keep >"$tmp/file"
for gpu in "" "$fake"; do
  run "OUT_DIR a file${gpu:+ (fake GPU)}" 1 "OUT_DIR $tmp/file is a file" "$gpu" "$tmp/file" "$tmp/no-bundle.tar.xz"
  [[ $(cat "$tmp/file") == keep ]] || fail "OUT_DIR a file: the file changed"
done

# (b) OUT_DIR below an existing file (it cannot be made), absolute and relative to the run's folder.
for gpu in "" "$fake"; do
  run "OUT_DIR below a file${gpu:+ (fake GPU)}" 1 "cannot create OUT_DIR $tmp/file/check" "$gpu" \
    "$tmp/file/check" "$tmp/no-bundle.tar.xz"
  [[ -f $tmp/file ]] || fail "OUT_DIR below a file: the file went"
done
ln -s ../file "$tmp/cwd/link"
(cd "$tmp/cwd" && PATH="$fake:$PATH" timeout 60 "$script" link/out/check "$tmp/no-bundle.tar.xz" >/dev/null 2>"$tmp/stderr")
rc=$?
if [[ $rc != 1 ]] || ! grep -q "cannot create OUT_DIR $tmp/cwd/link/out/check" "$tmp/stderr"; then
  fail "relative OUT_DIR below a file: exit $rc: $(head -c 600 "$tmp/stderr")"
else
  echo "ok: relative OUT_DIR below a file: exit $rc: $(cat "$tmp/stderr")"
fi
rm -f "$tmp/cwd/link" "$tmp/stderr"

# (c) A bundle that does not unpack, with a (fake) GPU present: garbage, and a real .tar.xz cut short.
head -c 4096 /dev/urandom >"$tmp/garbage.tar.xz"
mkdir -p "$tmp/stage/bin"
head -c 200000 /dev/urandom >"$tmp/stage/bin/zt_ops_tests"
tar -C "$tmp/stage" -cJf "$tmp/whole.tar.xz" .
head -c "$(($(stat -c %s "$tmp/whole.tar.xz") / 2))" "$tmp/whole.tar.xz" >"$tmp/truncated.tar.xz"
for b in garbage truncated; do
  run "bundle $b" 1 "bundle $tmp/$b.tar.xz does not unpack" "$fake" "$tmp/out-$b" "$tmp/$b.tar.xz"
  if [[ -e $tmp/out-$b/checks.log ]] && grep -q '^== ' "$tmp/out-$b/checks.log"; then
    fail "bundle $b: checks ran: $(grep '^== ' "$tmp/out-$b/checks.log" | head -3 | tr '\n' ' ')"
  fi
done

# (d) Valid arguments on a machine without a GPU (no fake one): one line, exit 77, OUT_DIR not made.
if command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -q GPU; then
  echo "skipped: (d) no GPU: this machine has one ($(nvidia-smi -L | head -1))"
else
  run "no GPU" 77 "no NVIDIA GPU here" "" "$tmp/out-d/check" "$tmp/no-bundle.tar.xz"
  [[ -e $tmp/out-d ]] && fail "no GPU: OUT_DIR was made"
fi
[[ $failed == 0 ]] || exit 1
echo "gpu_check.sh: OUT_DIR, bundle and no-GPU arguments checked"
