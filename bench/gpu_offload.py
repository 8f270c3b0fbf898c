#!/usr/bin/env python3
"""Issue 29's offload figures on a device: under a device cap (run.device_memory_mb, as PyTorch's
per-process memory fraction), the largest GPT that trains with its model states on the device and
the largest with ZeRO-Offload (stage 3, optimizer states and parameter shards in pinned host memory),
each found by the engine's own plan (`zerotrain estimate --json`: the predicted device peak of
bytes in use at once, the figure `train` checks before step 1) and then trained a few steps under
the cap; then the step time of one model that fits both ways, in memory against offloaded.

Prints one JSON line per trained run and one summary line (`"offload_summary": true`).
usage: bench/gpu_offload.py --bin build/zerotrain [--device cuda] [--cap-mb 3072] [--steps 4] [--work DIR]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PLACEMENTS = {
    "in memory": [],
    "offload cpu": ["zero_optimization.offload_optimizer.device=cpu", "zero_optimization.offload_param.device=cpu"],
}


def model_args(a, layers):
    # Stage 3 with a bounded gathered window (DeepSpeed's defaults keep every unit gathered) and
    # activation checkpointing, so what the device holds beyond the states is small in both placements.
    return ["--config", "configs/gpt_sotu.json", "bf16.enabled=true", "zero_optimization.stage=3",
            f"model.n_layer={layers}", f"model.n_embd={a.embd}", f"model.n_head={a.embd // 64}", f"model.block_size={a.ctx}",
            f"train_batch_size={a.batch}", f"train_micro_batch_size_per_gpu={a.batch}",
            "zero_optimization.stage3_max_live_parameters=30000000", "zero_optimization.stage3_max_reuse_distance=0",
            "zero_optimization.stage3_prefetch_bucket_size=15000000", "activation_checkpointing.profile=false",
            f"run.device={a.device}", f"run.device_memory_mb={a.cap_mb}", f"data.dir={a.data}"]


def predicted(a, layers, placement, host=False):
    cmd = [a.bin, "estimate", "--json", "--world", "1"] + model_args(a, layers) + PLACEMENTS[placement]
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"gpu_offload: {' '.join(cmd)} failed: {p.stderr.strip()[-500:]}")
    j = json.loads(p.stdout)
    s = j["stages"][3]
    peak = s["peak"] if placement == "in memory" else s["offload_both_cpu"]["peak"]
    return (peak["in_use"], j["parameters"]) if not host else peak.get("host", 0)


def largest(a, placement):
    """The most layers whose predicted device peak fits the cap and whose host bytes fit --host-mb
    (both grow with the layers)."""
    fits = lambda n: predicted(a, n, placement)[0] <= a.cap_mb << 20 and (
        a.host_mb == 0 or predicted(a, n, placement, host=True) <= a.host_mb << 20)
    if not fits(1):
        return 0
    lo, hi = 1, 2
    while hi <= a.max_layers and fits(hi):
        lo, hi = hi, hi * 2
    hi = min(hi, a.max_layers + 1)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo


def train(a, layers, placement, tag, extra=()):
    run_dir = os.path.join(a.work, tag)
    cmd = [a.bin, "train"] + model_args(a, layers) + PLACEMENTS[placement] + list(extra) + [
        f"run.max_steps={a.steps}", "steps_per_print=1", "data.eval_every=0", "run.eval_at_end=false",
        "run.save_weights=false", f"run.dir={run_dir}"]
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    row = {"offload_run": tag, "placement": placement, "layers": layers, "embd": a.embd, "ctx": a.ctx, "batch": a.batch,
           "cap_mib": a.cap_mb, "device": a.device, "passed": p.returncode == 0}
    if p.returncode != 0:
        row["error"] = p.stderr.strip().splitlines()[-1][-400:] if p.stderr.strip() else f"exit {p.returncode}"
        return row
    recs = [json.loads(l) for l in open(os.path.join(run_dir, "metrics.jsonl")) if '"loss"' in l]
    deltas = [b["elapsed_s"] - a_["elapsed_s"] for a_, b in zip(recs, recs[1:])]  # the first step warms up
    in_use, params = predicted(a, layers, placement)
    row.update(parameters=params, predicted_in_use=in_use, device_peak=recs[-1]["device_memory"]["peak"],
               s_per_step=round(statistics.median(deltas), 4), losses=[round(r["loss"], 5) for r in recs])
    row["peak_within_cap"] = row["device_peak"] <= a.cap_mb << 20
    row["passed"] = row["peak_within_cap"]
    return row


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "zerotrain"))
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--cap-mb", type=int, default=3072)
    ap.add_argument("--embd", type=int, default=1024)
    ap.add_argument("--ctx", type=int, default=256)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--max-layers", type=int, default=256)
    ap.add_argument("--host-mb", type=int, default=0, help="the host's pinned bytes the plan may take (0: any)")
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--data", default="data/tokens/english_gpt2")
    ap.add_argument("--work", default=None)
    a = ap.parse_args()
    a.work = a.work or tempfile.mkdtemp(prefix="gpu_offload_")
    most = {p: largest(a, p) for p in PLACEMENTS}
    rows = []
    for p, n in most.items():
        rows.append(train(a, n, p, f"largest-{p.split()[0]}"))
        print(json.dumps(rows[-1]), flush=True)
    # The step both ways on the model that fits in memory; offloaded once more without clipping, where
    # the host's update may run behind backward (Note [host update overlap]).
    both = train(a, most["in memory"], "offload cpu", "fits-both-offload")
    print(json.dumps(both), flush=True)
    noclip = train(a, most["in memory"], "offload cpu", "fits-both-offload-noclip", ["gradient_clipping=0"])
    print(json.dumps(noclip), flush=True)
    mem, off = rows[0], rows[1]
    summary = {"offload_summary": True, "device": a.device, "cap_mib": a.cap_mb,
               "largest_in_memory_params": mem.get("parameters"), "largest_offload_params": off.get("parameters"),
               "largest_ratio": round(off["parameters"] / mem["parameters"], 2) if mem.get("parameters") and off.get("parameters") else None,
               "step_in_memory_s": mem.get("s_per_step"), "step_offloaded_s": both.get("s_per_step"),
               "step_ratio": round(both["s_per_step"] / mem["s_per_step"], 2) if both.get("s_per_step") and mem.get("s_per_step") else None,
               "step_offloaded_noclip_s": noclip.get("s_per_step"),
               "same_losses": both.get("losses") == mem.get("losses") if both.get("losses") else None,
               "passed": all(r["passed"] for r in rows + [both, noclip])}
    print(json.dumps(summary), flush=True)
    sys.exit(0 if summary["passed"] else 1)


if __name__ == "__main__":
    main()
