#!/usr/bin/env bash
# Every benchmark beside its PyTorch peer, in one run (~2 minutes once built): MLP training
# (single process; 2 ranks x ZeRO stages 0-3 vs DDP and ZeroRedundancyOptimizer over gloo),
# collective bus bandwidth (MPI vs gloo), checkpoint save/load vs the disk, tokenizer MB/s (vs the
# npm packages' JS under node, when data/ has the text and vocabularies), and matmul GFLOP/s. All JSON lines go to the results
# file; a summary object with the ratios is printed last.
#
# usage: bench/run.sh [RESULTS]        (default bench/results.jsonl; never committed)
# env:   ZT_BUILD_DIR (default build), STEPS (timed training steps, default 300),
#        ZT_MNIST_DIR (default data/mnist; scripts/setup.sh fetches it),
#        ZT_BENCH_CKPT_DIR (default .cache/bench_ckpt; checkpoints of the bench, removed after),
#        ZT_BENCH_MEMORY=0 skips the per-stage peak-memory runs of the 53.6M MLP,
#        ZT_BENCH_OPENBLAS=0 skips the second PyTorch run with OpenBLAS (Debian's torch links the
#        generic libblas.so.3, which is the slow reference BLAS unless OpenBLAS is installed).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-bench/results.jsonl}
BUILD=${ZT_BUILD_DIR:-build}
STEPS=${STEPS:-300}
DATA=${ZT_MNIST_DIR:-data/mnist}
PY=/usr/bin/python3  # Debian's, with torch 1.13; the pyenv python3 on PATH has no torch
MPIRUN=(mpirun --allow-run-as-root --oversubscribe -np 2 --mca btl self,vader --mca btl_vader_max_send_size 262144)

for f in train-images-idx3-ubyte train-labels-idx1-ubyte; do
  [[ -f $DATA/$f ]] || { echo "run.sh: $DATA/$f is missing; run scripts/setup.sh first" >&2; exit 1; }
done
[[ -f $BUILD/CMakeCache.txt ]] || cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD" -j2 --target bench_train zt_bench_matmul bench_comm bench_ckpt bench_tokenizer zt_bench_conv \
  zt_bench_attention zerotrain >/dev/null
bin() { find "$BUILD" -type f -name "$1" -perm -u+x | head -n1; }
BENCH_TRAIN=$(bin bench_train) BENCH_MATMUL=$(bin zt_bench_matmul) BENCH_COMM=$(bin bench_comm)
BENCH_CKPT=$(bin bench_ckpt) ZEROTRAIN=$(bin zerotrain)

# OpenBLAS for a second PyTorch run, unpacked (not installed) into the git-ignored .cache/.
OPENBLAS_DIR=
if [[ ${ZT_BENCH_OPENBLAS:-1} != 0 ]]; then
  lib=.cache/openblas/usr/lib/x86_64-linux-gnu/openblas-openmp
  if [[ ! -f $lib/libblas.so.3 ]]; then
    tmp=$(mktemp -d)
    if (cd "$tmp" && apt-get download libopenblas0-openmp >/dev/null 2>&1); then
      mkdir -p .cache/openblas && dpkg-deb -x "$tmp"/libopenblas0-openmp_*.deb .cache/openblas
    else
      echo "run.sh: could not fetch libopenblas0-openmp; PyTorch runs with its reference BLAS only" >&2
    fi
    rm -rf "$tmp"
  fi
  [[ -f $lib/libblas.so.3 ]] && OPENBLAS_DIR=$PWD/$lib
fi

mkdir -p "$(dirname "$OUT")"
: >"$OUT"
# Runs a command; its JSON lines get "impl" (when missing) and go to the results file and stdout.
collect() {
  local impl=$1
  shift
  echo "== $*" >&2
  "$@" | "$PY" -c '
import json, sys
impl, out = sys.argv[1], open(sys.argv[2], "a")
for line in sys.stdin:
    if not line.startswith("{"):
        sys.stderr.write(line)
        continue
    row = json.loads(line)
    row.setdefault("impl", impl)
    out.write(json.dumps(row) + "\n")
    out.flush()
    print(json.dumps(row), flush=True)' "$impl" "$OUT"
}
# The same PyTorch command with the reference BLAS, then with OpenBLAS when available.
collect_torch() {
  collect pytorch "$PY" "$@"
  [[ -z $OPENBLAS_DIR ]] || collect pytorch env LD_LIBRARY_PATH="$OPENBLAS_DIR" "$PY" "$@"
}

collect zerotrain "$BENCH_TRAIN" --threads 2 --steps "$STEPS" --data "$DATA"
collect_torch bench/torch_train.py --threads 2 --steps "$STEPS" --data "$DATA"
collect zerotrain "$BENCH_TRAIN" --threads 2 --steps "$STEPS" --data "$DATA" --dtype bf16
collect_torch bench/torch_train.py --threads 2 --steps "$STEPS" --data "$DATA" --dtype bf16
collect zerotrain "${MPIRUN[@]}" "$BENCH_TRAIN" --threads 1 --stages 0,1,2,3 --steps "$STEPS" --data "$DATA"
collect_torch bench/torch_train.py --world 2 --steps "$STEPS" --data "$DATA"
collect zerotrain "${MPIRUN[@]}" "$BENCH_COMM"
collect pytorch "$PY" bench/comm_peer_torch.py 2
# Checkpoint save/load GB/s per rank beside the disk's write+fsync (473 MB of AdamW states, N = 2),
# then `zerotrain export` of that checkpoint in its own process: peak allocator bytes and RSS.
CKPT_DIR=${ZT_BENCH_CKPT_DIR:-.cache/bench_ckpt}
collect zerotrain "${MPIRUN[@]}" "$BENCH_CKPT" --dir "$CKPT_DIR" --keep
collect zerotrain "$ZEROTRAIN" export "$CKPT_DIR" --out "$CKPT_DIR/model.safetensors" --json
rm -rf "$CKPT_DIR"
# Encode MB/s of GPT-2's BPE and BERT's WordPiece on Moby-Dick, beside the npm packages' own JS.
if [[ -f data/moby-dick/data.txt && -f data/gpt2/Encoder.js && -f data/bert/index.js ]]; then
  collect zerotrain "$(bin bench_tokenizer)" --repeat 3
  if command -v node >/dev/null; then collect js node bench/data/tokenizer_peer.js data/moby-dick/data.txt 3; fi
fi
# Convolution GFLOP/s at the CNN's shapes (f32, bf16 native and on the f32 fallback), and attention
# forward + backward (flash style) beside the unfused product at the GPT's shape.
collect zerotrain "$(bin zt_bench_conv)"
collect zerotrain "$(bin zt_bench_attention)" 8 256 384 6
# Peak memory per rank by stage (one process pair per stage, so the OS's peak RSS is per stage):
# the 53.6M-parameter MLP 784-4096x4-10 at N = 2, buckets of 8M elements.
if [[ ${ZT_BENCH_MEMORY:-1} != 0 ]]; then
  for dt in f32 bf16; do
    for st in 0 1 2 3; do
      collect zerotrain "${MPIRUN[@]}" "$BENCH_TRAIN" --threads 1 --stages $st --steps 3 --warmup 1 --data "$DATA" \
        --hidden 4096,4096,4096,4096 --bucket 8000000 --dtype $dt
    done
  done
fi
collect zerotrain "$BENCH_MATMUL"
collect_torch bench/torch_train.py --matmul --threads 2

echo "== summary ($OUT)" >&2
"$PY" bench/train/summarize.py "$OUT"
