#!/usr/bin/env bash
# The GPU check: everything zerotrain can say about one NVIDIA GPU in one run (GPU time is scarce).
# Run it on the GPU machine from the repository root, with build-gpu/bundle.tar.xz made where the
# build tools are (scripts/gpu_bundle.sh): the machine needs CUDA 13's libraries (the toolkit's, or
# PyTorch's wheels for cuDNN and NCCL) and none of our Debian packages.
#   1. the op table's cuda rows against PyTorch's golden values and finite differences (every
#      ops test runs; the cpu rows run beside them), the device seam and allocator;
#   2. the nccl group on one rank, `train` on nccl at N = 1 and at N = 2 sharing the GPU (the
#      staged fallback's line); 3. the MLP, CNN and GPT trained on the GPU against the CPU, and
#      the engine (`zerotrain train`) on the GPU at N = 1 and 2 (two ranks sharing it) against the CPU;
#   4. the largest GPT under a device cap with and without ZeRO-Offload, and the offloaded step;
#   5. GPT-2 124M's shape trained on the GPU (no engine) at 8 and 64 x 1024 tokens a step, with cuDNN's
#      attention and with the own kernels, beside PyTorch (eager, F.scaled_dot_product_attention,
#      torch.compile), and a Llama of similar size beside the same PyTorch class; MFU by llm.c's
#      formula and by ours; the engine at stage 0 and 3, and the offloaded step at 64K tokens;
#   6. compute-sanitizer memcheck over 1 and 3, racecheck and synccheck over GPT's training,
#      racecheck over the attention kernels;
#   7. Nsight Compute's time per kernel over one bf16 step; 8. no call refused by cuDNN's attention.
# Writes summary.json, summary.md, bench.jsonl, profile.md (ncu.csv) and checks.log to OUT_DIR. Exit 0
# when every check passed, 1 when one failed, 77 (one line) where no GPU is present; 1 (one line, before
# any check) for an OUT_DIR that cannot be a writable folder or a bundle that does not unpack.
# ZT_GPU_CHECK_ONLY="name ..." runs only those checks (a rerun), ZT_GPU_CHECK_BUDGET_S caps the time.
# Usage: scripts/gpu_check.sh OUT_DIR [BUNDLE]
set -uo pipefail
out="${1:?usage: scripts/gpu_check.sh OUT_DIR [BUNDLE]}"
bundle="${2:-build-gpu/bundle.tar.xz}"
# Without set -e a failed step would carry on (once with $out empty, writing at /): each refusal is
# one line, exit 1, before any check runs.
die() { echo "gpu_check: $*" >&2; exit 1; }
# kind PATH: what stands at PATH where a folder should.
kind() {
  if [[ -L $1 && ! -e $1 ]]; then echo "a dangling link"
  elif [[ -f $1 ]]; then echo "a file"
  else echo "a $(stat -Lc %F "$1")"; fi
}
[[ $out == /* ]] || out="$PWD/$out"
# OUT_DIR is, or can become, a writable folder: looked at, not made (without a GPU nothing is written).
if [[ -e $out || -L $out ]]; then
  [[ -d $out ]] || die "OUT_DIR $out is $(kind "$out"), not a folder"
  [[ -w $out && -x $out ]] || die "OUT_DIR $out is not writable"
else
  up="$(dirname "$out")"
  while [[ ! -e $up && ! -L $up ]]; do up="$(dirname "$up")"; done
  [[ -d $up ]] || die "cannot create OUT_DIR $out: $up is $(kind "$up"), not a folder"
  [[ -w $up && -x $up ]] || die "cannot create OUT_DIR $out: $up is not writable"
fi
# A GPU is one nvidia-smi lists (it may exit 0 listing none).
if ! gpus="$(nvidia-smi -L 2>/dev/null)" || [[ $gpus != *GPU* ]]; then
  echo "gpu_check: no NVIDIA GPU here (nvidia-smi lists none); nothing was run" >&2
  exit 77
fi
[[ -f "$bundle" ]] || die "$bundle is missing: make it with scripts/gpu_bundle.sh"
work="$(mktemp -d)" || die "cannot make a temporary folder (mktemp -d)"
trap 'rm -rf "$work"' EXIT
# The bundle unpacks before OUT_DIR is made, so a bad one leaves nothing there; tar's first line
# (xz's, for a bundle that is not .tar.xz or is cut short) says why.
err="$(tar -C "$work" -xJf "$bundle" 2>&1)" || die "bundle $bundle does not unpack (${err%%$'\n'*})"
[[ -d $work/bin ]] || die "bundle $bundle has no bin/ (make it with scripts/gpu_bundle.sh)"
err="$(mkdir -p -- "$out" 2>&1)" || die "cannot create OUT_DIR $out: $(sed -n '1s/.*: //p' <<<"$err")"
out="$(cd "$out" && pwd -P)" || die "OUT_DIR $out cannot be entered"
[[ $out == /* ]] || die "OUT_DIR $1 resolved to '$out', not a path"  # never empty, so nothing lands at /
log="$out/checks.log"
: 2>/dev/null >"$log" || die "OUT_DIR $out is not writable ($log cannot be written)"

# CUDA's libraries: the toolkit's, then those PyTorch's wheels bring (cuDNN, NCCL, cuBLAS).
libs="$work/lib"
for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib $(python3 -c 'import nvidia, os
for p in nvidia.__path__:
    for d in sorted(os.listdir(p)): print(os.path.join(p, d, "lib"))' 2>/dev/null); do
  [[ -d "$d" ]] && libs+=":$d"
done
export LD_LIBRARY_PATH="$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# A library still missing (another image's layout) is looked for once under /usr and /opt.
for so in $(for p in "$work"/bin/*; do ldd "$p"; done | awk '$3 == "not" {print $1}' | sort -u); do
  found="$(find /usr /opt -name "$so" 2>/dev/null | head -1)"
  [[ -n $found ]] && LD_LIBRARY_PATH+=":$(dirname "$found")"
done
# The bundle's OpenMPI, relocated, for the engine's runs of two ranks sharing the one GPU.
export OPAL_PREFIX="$work/mpi/usr" PATH="$work/mpi/usr/bin:$PATH" OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export ZT_SOURCE_DIR="$PWD"
bin="$work/bin"
steps="$work/steps.tsv"  # name, status, seconds, gtest json (or -)
: >"$steps"
: >"$out/bench.jsonl"

{
  echo "== machine"
  nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader
  # The host beside it (its cores and memory set the offloaded AdamW's floor).
  echo "host: $(nproc) processing units; $(lscpu 2>/dev/null | grep -E '^(Model name|Socket\(s\)|Core\(s\) per socket|Thread\(s\) per core):' | tr -s ' ' | paste -sd ';')"
  grep -E '^MemTotal' /proc/meminfo
  echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
  for p in "$bin"/*; do ldd "$p" | grep -F "not found" | sed "s|^|$(basename "$p"): |"; done
  # The cuDNN and NCCL the programs load (cuDNN's attention needs 9.10.2 or later, Note [cudnn attention]).
  ldd "$bin/zt_ops_tests" | grep -E 'lib(cudnn|nccl|cublasLt)\.' | sed 's|^[[:space:]]*|loads: |'
  python3 -c 'import ctypes; v = ctypes.CDLL("libcudnn.so.9").cudnnGetVersion()
print(f"cudnn_version: {v // 10000}.{v // 100 % 100}.{v % 100}")' || echo "cudnn_version: unknown (libcudnn.so.9 did not load)"
} >>"$log" 2>&1

# The whole check's time (ZT_GPU_CHECK_BUDGET_S, default 540): a step gets at most what is left,
# and once it is spent the later steps are recorded as not run.
budget="${ZT_GPU_CHECK_BUDGET_S:-540}"
start=$SECONDS

# step NAME TIMEOUT_S COMMAND...: runs one GoogleTest check, its output into the log, its JSON kept.
# bench_step is the same for a benchmark, whose JSON lines go to bench.jsonl.
step() { timed_step gtest "$@"; }
bench_step() { timed_step bench "$@"; }
# A peer's benchmark (PyTorch): where this machine's PyTorch cannot run it (no SDPA, torch.compile
# without its compiler), the step is skipped with the reason in checks.log, not failed.
peer_step() { timed_step peer "$@"; }
fn_step() { timed_step fn "$@"; }  # a shell function of this script (no timeout of its own)
timed_step() {
  local kind="$1" name="$2" limit="$3"
  shift 3
  local json="$work/$name.json" t0=$SECONDS rc status left=$((budget - (SECONDS - start)))
  if [[ -n ${ZT_GPU_CHECK_ONLY:-} && " $ZT_GPU_CHECK_ONLY " != *" $name "* ]]; then
    printf '%s\t%s\t0\t-\n' "$name" "skipped (not in ZT_GPU_CHECK_ONLY)" >>"$steps"
    return
  fi
  ((left < limit)) && limit=$left
  if ((limit < 5)); then
    printf '%s\t%s\t0\t-\n' "$name" "not run (the check's ${budget}s were spent)" >>"$steps"
    return
  fi
  echo "== $name: $*" >>"$log"
  if [[ $kind == gtest ]]; then
    timeout --signal=KILL "$limit" "$@" --gtest_brief=1 --gtest_output="json:$json" >>"$log" 2>&1
  elif [[ $kind == fn ]]; then
    "$@" >>"$out/bench.jsonl" 2>>"$log"
  else
    timeout --signal=KILL "$limit" "$@" >>"$out/bench.jsonl" 2>>"$log"
  fi
  rc=$?
  case $rc in 0) status=passed ;; 137) status="timed out after ${limit}s" ;; *) status="failed (exit $rc)" ;; esac
  [[ $kind == peer && $rc != 0 ]] && status="skipped (the PyTorch peer: $status; checks.log says why)"
  printf '%s\t%s\t%d\t%s\n' "$name" "$status" $((SECONDS - t0)) "$([[ -f "$json" ]] && echo "$json" || echo -)" >>"$steps"
  echo "== $name: $status" >>"$log"
}

sanitizer="$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)"
gpu_ops='*cuda*:OnGpu*:DeviceSeam*:*EveryBackend*'
step ops 150 "$bin/zt_ops_tests"
# The attention rows again on the own kernels (cuDNN's fused attention turned off, Note [cudnn attention]).
ZT_CUDNN_ATTENTION=0 step ops_own_attention 60 "$bin/zt_ops_tests" --gtest_filter='*ttention*'
step nccl 60 "$bin/test_comm" --gtest_filter='Nccl*:*Store*'
step models 90 "$bin/nn_on_device_test"

# 5. GPT-2 124M's shape (T=1024) trained on the GPU without the engine beside PyTorch on the same
# machine (bench/torch_gpt.py: the same model class, tokens and AdamW, fused on the GPU), JSON
# lines into bench.jsonl: 8 x 1024 in f32 and bf16, then 64 x 1024 (the anchors' batch) in bf16
# with cuDNN's attention and with the own kernels, PyTorch eager, with F.scaled_dot_product_attention
# and with torch.compile where this PyTorch has them; a Llama of similar size the same way.
gpt2=(--name gpt2-124M --layers 12 --embd 768 --heads 12 --vocab 50257 --ctx 1024 --steps 8 --warmup 2)
llama=(--name llama-124M --family llama --layers 12 --embd 768 --heads 12 --kv-heads 4 --ffn 2048 --vocab 32000
  --ctx 1024 --steps 8 --warmup 2)
bench_step gpt2_zerotrain 120 "$bin/bench_gpt" "${gpt2[@]}" --batch 8 --device cuda --dtype f32,bf16
peer_step gpt2_pytorch 120 python3 bench/torch_gpt.py "${gpt2[@]}" --batch 8 --device cuda --dtype f32,bf16
bench_step gpt2_64_zerotrain 90 "$bin/bench_gpt" "${gpt2[@]}" --batch 64 --device cuda --dtype bf16
ZT_CUDNN_ATTENTION=0 bench_step gpt2_64_own_attention 90 "$bin/bench_gpt" "${gpt2[@]}" --name gpt2-124M-own-attention \
  --batch 64 --device cuda --dtype bf16
peer_step gpt2_64_pytorch_sdpa 90 python3 bench/torch_gpt.py "${gpt2[@]}" --batch 64 --device cuda --dtype bf16 \
  --attention sdpa
peer_step gpt2_64_pytorch_compile 150 python3 bench/torch_gpt.py "${gpt2[@]}" --batch 64 --device cuda --dtype bf16 \
  --attention sdpa --compile 1
bench_step llama_64_zerotrain 90 "$bin/bench_gpt" "${llama[@]}" --batch 64 --device cuda --dtype bf16
peer_step llama_64_pytorch_sdpa 90 python3 bench/torch_gpt.py "${llama[@]}" --batch 64 --device cuda --dtype bf16 \
  --attention sdpa

# 3b. The engine on the GPU: `zerotrain train` with run.device=cuda against run.device=cpu on the
# same machine, a small GPT on data/tokens/english_gpt2 (carried there), stages 0-3 in fp32 and
# stage 3 in bf16, at N = 1 and at N = 2 (mpirun: two ranks on the one GPU, collectives staged
# through the host) against the cpu's N = 1 run of the same global batch; the logged losses must
# agree within each precision's tolerance; then eval of the weights on both (and generate, where
# data/gpt2's tokenizer files were carried too).
engine_check() {
  local tok="data/tokens/english_gpt2"
  [[ -f "$tok/train.bin" || -d "$tok" ]] || { echo "no $tok here (carry it)" >&2; return 1; }
  local gpt=(--config configs/gpt_sotu.json model.n_layer=2 model.n_embd=128 model.n_head=4 model.block_size=64
    train_batch_size=16 train_micro_batch_size_per_gpu=8 data.eval_every=0 run.eval_at_end=false steps_per_print=1
    run.max_steps=6 run.comm_backend=local "data.dir=$tok")
  local st dt dev
  for st in 0 1 2 3; do
    for dt in false true; do
      [[ $dt == true && $st != 3 ]] && continue
      for dev in cpu cuda; do
        "$bin/zerotrain" train "${gpt[@]}" "zero_optimization.stage=$st" "bf16.enabled=$dt" "run.device=$dev" \
          "run.dir=$work/engine/$dev-$st-$dt" >/dev/null || return 1
      done
      mpirun --oversubscribe --bind-to none -np 2 "$bin/zerotrain" train "${gpt[@]}" run.comm_backend=auto "zero_optimization.stage=$st" \
        "bf16.enabled=$dt" run.device=cuda "run.dir=$work/engine/cuda2-$st-$dt" >/dev/null || return 1
    done
  done
  # On cuda only, against the in-memory cpu runs: ZeRO-Offload with stage 3's shards pinned on the
  # host too (Note [host residence]), ZeRO-Infinity (both in swap files), and sparse embedding rows
  # (zt/ops/compress.h's kernels).
  "$bin/zerotrain" train "${gpt[@]}" zero_optimization.stage=3 bf16.enabled=true run.device=cuda \
    zero_optimization.offload_optimizer.device=cpu zero_optimization.offload_param.device=cpu \
    "run.dir=$work/engine/cuda-3offload-true" >/dev/null || return 1
  # ZeRO-Infinity: the optimizer's states and stage 3's shards in swap files, through pinned tiles.
  "$bin/zerotrain" train "${gpt[@]}" zero_optimization.stage=3 bf16.enabled=true run.device=cuda \
    zero_optimization.offload_optimizer.device=nvme zero_optimization.offload_param.device=nvme \
    "zero_optimization.offload_optimizer.nvme_path=$work/nvme" "zero_optimization.offload_param.nvme_path=$work/nvme" \
    "run.dir=$work/engine/cuda-3nvme-true" >/dev/null || return 1
  # One micro-batch a step: the reduced gradients go straight down, none stays on the device (Note
  # [host gradient shard]), against the cpu's run of the same batch.
  local dev
  for dev in cpu cuda; do
    local off=()
    [[ $dev == cuda ]] && off=(zero_optimization.offload_optimizer.device=cpu)
    "$bin/zerotrain" train "${gpt[@]}" zero_optimization.stage=3 bf16.enabled=true train_micro_batch_size_per_gpu=16 \
      "run.device=$dev" "${off[@]}" "run.dir=$work/engine/$dev-3g1$([[ $dev == cuda ]] && echo offload)-true" \
      >/dev/null || return 1
  done
  "$bin/zerotrain" train "${gpt[@]}" zero_optimization.stage=1 bf16.enabled=false run.device=cuda \
    sparse_gradients=true "run.dir=$work/engine/cuda-1sparse-false" >/dev/null || return 1
  for dev in cpu cuda; do  # eval and (with data/gpt2's tokenizer carried) generate, on each device
    "$bin/zerotrain" eval "${gpt[@]}" data.eval_batches=4 "run.device=$dev" \
      --weights "$work/engine/cpu-0-false/model.safetensors" >"$work/engine/eval-$dev.txt" || return 1
    [[ -f data/gpt2/encoder.json ]] || continue
    "$bin/zerotrain" generate "${gpt[@]}" "run.device=$dev" --weights "$work/engine/cpu-0-false/model.safetensors" \
      --tokens 16 --temperature 0 --prompt "The" >"$work/engine/generate-$dev.txt" || return 1
  done
  python3 - "$work/engine" <<'PY'
import json, os, re, sys
root, bad = sys.argv[1], 0
val = {d: float(re.search(r"validation loss: ([0-9.]+)", open(f"{root}/eval-{d}.txt").read()).group(1))
       for d in ("cpu", "cuda")}
gen = [f"{root}/generate-{d}.txt" for d in ("cpu", "cuda")]
same_text = open(gen[0]).read() == open(gen[1]).read() if all(map(os.path.exists, gen)) else None
d = abs(val["cuda"] - val["cpu"]) / val["cpu"]
bad += not (d <= 1e-3)
print(json.dumps({"engine_on_cuda": True, "stage": "eval and generate (stage-0 weights)", "bf16": False, "steps": 0,
                  "final_loss_cpu": val["cpu"], "final_loss_cuda": val["cuda"], "worst_relative_difference": d,
                  "tolerance": 1e-3, "passed": d <= 1e-3, "greedy_text_equal": same_text}))
for name in sorted(os.listdir(root)):
    if not name.startswith("cuda"): continue
    dev, variant, bf16 = name.split("-")  # "3", or "3offload" against cpu-3's in-memory run; cuda2: N = 2
    st = re.match(r"\d+", variant).group()
    base = re.sub(r"(offload|nvme|sparse)$", "", variant)  # the cpu run of the same batch
    loss = lambda d: {j["step"]: j["loss"] for j in map(json.loads, open(f"{root}/{d}/metrics.jsonl")) if "loss" in j}
    want, got = loss(f"cpu-{base}-{bf16}"), loss(name)
    tol = 2e-2 if bf16 == "true" else 1e-3
    worst = max(abs(got[k] - want[k]) / max(1.0, abs(want[k])) for k in want)
    ok = len(got) == len(want) and worst <= tol
    bad += not ok
    print(json.dumps({"engine_on_cuda": True, "stage": int(st), "variant": variant, "ranks": 2 if dev == "cuda2" else 1,
                      "bf16": bf16 == "true", "steps": len(got),
                      "final_loss_cpu": want[max(want)], "final_loss_cuda": got[max(got)],
                      "worst_relative_difference": worst, "tolerance": tol, "passed": ok}))
sys.exit(1 if bad else 0)
PY
}
fn_step engine_cuda_vs_cpu 150 engine_check

# 2b. `zerotrain train` on nccl: named at N = 1 (the metrics' start record names it; the losses
# equal the staged group's run bit for bit: one rank reduces nothing), and "auto" at N = 2 with both
# ranks on the one GPU, where NCCL refuses a shared GPU: the staged group, and the line saying why.
nccl_engine() {
  local tok="data/tokens/english_gpt2" run
  local gpt=(--config configs/gpt_sotu.json model.n_layer=2 model.n_embd=128 model.n_head=4 model.block_size=64
    train_batch_size=16 train_micro_batch_size_per_gpu=8 data.eval_every=0 run.eval_at_end=false steps_per_print=1
    run.max_steps=6 run.device=cuda run.save_weights=false "data.dir=$tok")
  mkdir -p "$work/nccl" || return 1
  for run in nccl local; do
    "$bin/zerotrain" train "${gpt[@]}" "run.comm_backend=$run" "run.dir=$work/nccl/$run" 2>"$work/nccl/$run.err" \
      >/dev/null || { cat "$work/nccl/$run.err" >&2; return 1; }
  done
  mpirun --oversubscribe --bind-to none -np 2 "$bin/zerotrain" train "${gpt[@]}" train_micro_batch_size_per_gpu=4 \
    run.comm_backend=auto "run.dir=$work/nccl/shared" 2>"$work/nccl/shared.err" >/dev/null ||
    { cat "$work/nccl/shared.err" >&2; return 1; }
  python3 - "$work/nccl" <<'PY'
import json, sys
root = sys.argv[1]
def run(name):
    lines = [json.loads(l) for l in open(f"{root}/{name}/metrics.jsonl")]
    start = [j for j in lines if j.get("event") == "start"][0]
    return start["comm_backend"], {j["step"]: j["loss"] for j in lines if "loss" in j}
(b1, l1), (bl, ll), (b2, _) = run("nccl"), run("local"), run("shared")
why = [l.strip() for l in open(f"{root}/shared.err") if "nccl" in l.lower()][:2]
ok = b1 == "nccl" and l1 == ll and len(l1) > 0 and b2 != "nccl" and len(why) > 0
print(json.dumps({"nccl_engine": True, "backend_n1": b1, "losses_equal_to_local": l1 == ll, "backend_n2_shared_gpu": b2,
                  "fallback_line": why, "passed": ok}))
sys.exit(0 if ok else 1)
PY
}
fn_step nccl_engine 60 nccl_engine

# 5b. The same shape through the engine (`zerotrain train`, run.device=cuda, one rank, bf16, the
# metrics' step times after the first): stage 0 and stage 3, and stage 3 with ZeRO-Offload's states
# on the host, at 8 x 1024 tokens a step and at 64 x 1024 (64K tokens: the offloaded step against the
# in-memory one, where the host's AdamW has a step's compute to hide behind), beside bench_gpt's
# engine-less step above.
engine_gpt2() {
  local run st batch extra clip
  # Without clipping the host's update starts behind backward (Note [host update overlap]); a clipped
  # run gets that from super_offload once its steps stop clipping, which 8 steps from init never do.
  for run in 0@8 3offload@8 3offload-noclip@8 0@64 3@64 3offload@64 3offload-noclip@64; do
    st="${run%@*}" batch="${run#*@}" extra=() clip=1.0
    [[ $st == 3offload* ]] && extra=(zero_optimization.offload_optimizer.device=cpu)
    [[ $st == *noclip ]] && clip=0
    "$bin/zerotrain" train --config configs/gpt_sotu.json model.n_layer=12 model.n_embd=768 model.n_head=12 \
      model.block_size=1024 "train_batch_size=$batch" "train_micro_batch_size_per_gpu=$batch" "gradient_clipping=$clip" \
      "zero_optimization.stage=${st:0:1}" bf16.enabled=true run.device=cuda run.max_steps=8 steps_per_print=1 \
      data.eval_every=0 run.eval_at_end=false run.save_weights=false data.dir=data/tokens/english_gpt2 \
      "${extra[@]}" "run.dir=$work/engine_gpt2/$st-$batch" 2>"$work/engine_gpt2-$st-$batch.err" >/dev/null || return 1
    python3 - "$work/engine_gpt2/$st-$batch/metrics.jsonl" "$st" "$batch" "$work/engine_gpt2-$st-$batch.err" <<'PY' || return 1
import json, statistics, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
recs = [j for j in lines if "loss" in j]
params = [j["summary"]["parameters"] for j in lines if j.get("event") == "final"][0]
batch = int(sys.argv[3])
dt = statistics.median(b["elapsed_s"] - a["elapsed_s"] for a, b in zip(recs[1:], recs[2:]))
row = {"engine_gpt2": True, "model": "gpt2-124M", "impl": "zerotrain train, stage " + sys.argv[2],
       "params": params, "layers": 12, "ctx": 1024, "embd": 768, "batch": batch,
       "dtype": "bf16", "tokens_per_s": round(batch * 1024 / dt), "step_s": round(dt, 5),
       "device_peak_mib": round(recs[-1]["device_memory"]["peak"] / 2**20, 1), "final_loss": recs[-1]["loss"],
       "start_lines": [l.strip() for l in open(sys.argv[4]) if l.startswith("zerotrain: rank 0")][:1]}
if "offload" in recs[-1]:  # the host update's split per step, after the first (as bench/offload_device.py)
    per = lambda k: round((recs[-1]["offload"][k] - recs[1]["offload"][k]) / (len(recs) - 2), 5)
    row.update({k: per(k) for k in ("update_s", "early_update_s", "early_wait_s", "down_s", "up_s")})
    row["host_hidden_fraction"] = round(max(0.0, 1 - row["early_wait_s"] / row["early_update_s"]), 3) if row["early_update_s"] > 0 else 0.0
print(json.dumps(row))
PY
  done
}
fn_step engine_gpt2 180 engine_gpt2

# 4. Past the device's memory (bench/gpu_offload.py): under a 3 GiB device cap, the largest GPT
# (1024 wide, T = 256, bf16, stage 3) the engine's plan fits with its states on the device and with
# ZeRO-Offload (optimizer states and parameter shards in pinned host memory), each trained 4 steps
# under the cap, and the step of the first both ways. With no gradient shard on the device (Note
# [host gradient shard]) the host's pinned memory bounds it: the plan may take 96 GiB of it, and
# the search stops at 256 layers (3.3B parameters, 49 GiB) to fit the check's time.
bench_step offload_largest 200 python3 bench/gpu_offload.py --bin "$bin/zerotrain" --device cuda --cap-mb 3072 \
  --max-layers 256 --host-mb 98304 --work "$work/offload"

# 6. compute-sanitizer over the ops and the models on the GPU.
if [[ -x "$sanitizer" ]]; then
  san=("$sanitizer" --error-exitcode 9 --print-limit 20)
  step memcheck_ops 120 "${san[@]}" --tool memcheck "$bin/zt_ops_tests" --gtest_filter="$gpu_ops:-*GradCheck*"
  step memcheck_models 90 "${san[@]}" --tool memcheck "$bin/nn_on_device_test"
  step racecheck_gpt 60 "${san[@]}" --tool racecheck "$bin/nn_on_device_test" --gtest_filter='*Gpt*'
  step synccheck_gpt 60 "${san[@]}" --tool synccheck "$bin/nn_on_device_test" --gtest_filter='*Gpt*'
  step racecheck_attention 60 "${san[@]}" --tool racecheck "$bin/zt_ops_tests" --gtest_filter='Attention.EveryBackend*'
else
  echo "== compute-sanitizer not found: memcheck, racecheck and synccheck not run" >>"$log"
fi

# 7. Where a bf16 step's GPU time goes: Nsight Compute times every kernel of one step of the same
# shape with 2 layers (each layer's kernels are the same); profile.md lists the kernels by total time.
ncu_path="$(command -v ncu || true)"
if [[ -n "$ncu_path" ]]; then
  bench_step profile_bf16 120 "$ncu_path" --clock-control none --metrics gpu__time_duration.sum --csv --log-file "$work/ncu.csv" \
    "$bin/bench_gpt" "${gpt2[@]}" --name profiled --layers 2 --steps 1 --warmup 0 --device cuda --dtype bf16
  cp "$work/ncu.csv" "$out/ncu.csv"
  python3 - "$work/ncu.csv" "$out/profile.md" <<'PY' 2>>"$log"
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
head = rows[0]
name, unit, value = head.index("Kernel Name"), head.index("Metric Unit"), head.index("Metric Value")
scale = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3, "s": 1e6, "second": 1e6}
total, count = collections.Counter(), collections.Counter()
for r in rows[1:]:
    k = r[name].split("(")[0][:90]
    total[k] += float(r[value].replace(",", "")) * scale[r[unit]]
    count[k] += 1
with open(sys.argv[2], "w") as f:
    f.write(f"# One bf16 step, 2 layers: {sum(total.values()) / 1e3:.2f} ms of kernels\n\n")
    f.write("| kernel | launches | total us | share |\n|---|---|---|---|\n")
    for k, t in total.most_common(25):
        f.write(f"| `{k}` | {count[k]} | {t:.0f} | {t / sum(total.values()):.1%} |\n")
PY
fi

# 8. cuDNN's attention took every 16-bit call offered to it (Note [cudnn attention]): its refusal
# lines in the log (a graph no plan finalizes for, with or without its padding mask) fail this step,
# so a silent fallback to the own kernels is seen. Blackwell's backward is refused by design.
cudnn_attention_ran() {
  local refusals
  refusals="$(grep -F "cuDNN attention refuses" "$log" | grep -vF "Blackwell" | sort -u)"
  python3 -c 'import json, sys; print(json.dumps({"cudnn_attention_refusals": sys.argv[1].splitlines()}))' "$refusals"
  [[ -z $refusals ]] || { echo "$refusals" >&2; return 1; }
}
fn_step cudnn_attention_ran 10 cudnn_attention_ran

python3 - "$steps" "$out" "$log" <<'PY'
import json, sys
steps_file, out, log = sys.argv[1:]
gpu = open(log).read().split("\n")[1].strip()
cudnn = next((l.split(": ", 1)[1].strip() for l in open(log) if l.startswith("cudnn_version: ")), "unknown")
steps = []
for line in open(steps_file):
    name, status, secs, js = line.rstrip("\n").split("\t")
    s = {"name": name, "status": status, "seconds": float(secs)}
    if js != "-":
        g = json.load(open(js))
        s.update(tests=g["tests"], failures=g["failures"], disabled=g.get("disabled", 0))
        ran = skipped = 0
        failed = []
        for suite in g["testsuites"]:
            for t in suite["testsuite"]:
                if t.get("result") == "SKIPPED": skipped += 1
                else: ran += 1
                if t.get("failures"):
                    failed.append({"test": suite["name"] + "." + t["name"],
                                   "first_failure": t["failures"][0]["failure"][:600]})
        s.update(ran=ran, skipped=skipped, failed=failed)
    steps.append(s)
ok = all(s["status"] == "passed" or s["status"].startswith("skipped") for s in steps)
bench = [json.loads(l) for l in open(out + "/bench.jsonl") if l.startswith("{")]
engine = [b for b in bench if "engine_on_cuda" in b]
offload = [b for b in bench if "offload_run" in b or "offload_summary" in b]
nccl = [b for b in bench if "nccl_engine" in b]
bench = [b for b in bench if b.get("model") not in (None, "profiled")]  # not step 6's run under the profiler
for b in bench:  # MFU by our count (6N + 12 L T d, as nanoGPT's) and by llm.c's (6N + 6 L T d), the same peak
    peak = (67 if b["dtype"] == "f32" else 989) * 1e12
    b["mfu"] = round(b["tokens_per_s"] * (6 * b["params"] + 12 * b["layers"] * b["ctx"] * b["embd"]) / peak, 4)
    b["mfu_llmc"] = round(b["tokens_per_s"] * (6 * b["params"] + 6 * b["layers"] * b["ctx"] * b["embd"]) / peak, 4)
    b["impl"] = b["impl"] + {"sdpa": " (SDPA)", "eager": ""}.get(b.get("attention"), "") + (" compiled" if b.get("compiled") else "")
# The issue's goals at 64 x 1024 tokens a step, bf16 (reported; the check passes on correctness alone).
def pick(model, impl, batch=64):
    return next((b for b in bench if b["model"] == model and b["impl"] == impl and b.get("batch") == batch
                 and b["dtype"] == "bf16"), None)
zt, sdpa = pick("gpt2-124M", "zerotrain"), pick("gpt2-124M", "pytorch (SDPA)")
ll = pick("llama-124M", "zerotrain")
mem, off = pick("gpt2-124M", "zerotrain train, stage 0"), pick("gpt2-124M", "zerotrain train, stage 3offload")
hid = pick("gpt2-124M", "zerotrain train, stage 3offload-noclip")
goals = {"gpt2_tokens_per_s": zt and zt["tokens_per_s"], "gpt2_goal_460k": bool(zt and zt["tokens_per_s"] >= 460e3),
         "gpt2_vs_pytorch_sdpa": zt and sdpa and round(zt["tokens_per_s"] / sdpa["tokens_per_s"], 3),
         "llama_mfu": ll and ll["mfu"], "llama_goal_35pct": bool(ll and ll["mfu"] >= 0.35),
         "offload_step_ratio_64k": mem and off and round(off["step_s"] / mem["step_s"], 3),
         "offload_goal_1_3": bool(mem and off and off["step_s"] <= 1.3 * mem["step_s"]),
         "offload_unclipped_step_ratio_64k": mem and hid and round(hid["step_s"] / mem["step_s"], 3)}
json.dump({"gpu": gpu, "cudnn": cudnn, "passed": ok, "steps": steps, "engine": engine, "offload": offload, "nccl": nccl,
           "goals": goals, "bench": bench}, open(out + "/summary.json", "w"), indent=1)
with open(out + "/summary.md", "w") as f:
    f.write(f"# GPU check: {'passed' if ok else 'FAILED'}\n\nGPU: {gpu}\n\n")
    f.write("| check | status | seconds | tests ran | skipped | failed |\n|---|---|---|---|---|---|\n")
    for s in steps:
        f.write(f"| {s['name']} | {s['status']} | {s['seconds']:.0f} | {s.get('ran', '')} | "
                f"{s.get('skipped', '')} | {len(s.get('failed', []))} |\n")
    if engine:
        f.write("\n| engine on cuda | ranks | steps | final loss cpu | final loss cuda | worst rel. diff | tolerance |\n"
                "|---|---|---|---|---|---|---|\n")
        for e in engine:
            f.write(f"| stage {e['stage']} {e.get('variant', '')} {'bf16' if e['bf16'] else 'fp32'} | {e.get('ranks', 1)} | "
                    f"{e['steps']} | {e['final_loss_cpu']:.5f} | {e['final_loss_cuda']:.5f} | "
                    f"{e['worst_relative_difference']:.2e} | {e['tolerance']} |\n")
    runs = [o for o in offload if "offload_run" in o]
    if runs:
        f.write("\n| offload run | placement | layers | parameters | s/step | device peak MiB | cap MiB | passed |\n"
                "|---|---|---|---|---|---|---|---|\n")
        for o in runs:
            f.write(f"| {o['offload_run']} | {o['placement']} | {o['layers']} | {o.get('parameters', '')} | "
                    f"{o.get('s_per_step', '')} | {o.get('device_peak', 0) / 2**20:.0f} | {o['cap_mib']} | "
                    f"{o['passed']} {o.get('error', '')} |\n")
    for o in offload:
        if "offload_summary" in o:
            f.write(f"\nOffload: {json.dumps(o)}\n")
    if bench:
        f.write("\n| model | impl | batch | dtype | tokens/s | step s | MFU (ours) | MFU (llm.c) | device peak MiB | "
                "host update s | hidden |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
        for b in bench:
            f.write(f"| {b['model']} | {b['impl']} | {b.get('batch', '')} | {b['dtype']} | {b['tokens_per_s']:.0f} | "
                    f"{b['step_s']} | {b['mfu']} | {b['mfu_llmc']} | {b.get('device_peak_mib', b.get('peak_mib', ''))} | "
                    f"{b.get('update_s', '')} | {b.get('host_hidden_fraction', '')} |\n")
    f.write(f"\nGoals (64 x 1024, bf16): {json.dumps(goals)}\n")
    for n in nccl:
        f.write(f"\nnccl from train: {json.dumps(n)}\n")
    for s in steps:
        for t in s.get("failed", []):
            f.write(f"\n**{s['name']}: {t['test']}**\n\n```\n{t['first_failure']}\n```\n")
print(open(out + "/summary.md").read())
sys.exit(0 if ok else 1)
PY
