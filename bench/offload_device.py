#!/usr/bin/env python3
"""Issue 29's step split of ZeRO-Offload on a device, measured on the sim device (Note [host
residence] in src/zero/optim_shard.cpp): GPT (configs/gpt_sotu.json, 30M parameters) in bf16 at
N = 2, each stage with the optimizer in the device's memory, in pinned host memory
(offload_optimizer.device=cpu) and in swap files (nvme), side by side in one invocation.

Per row, from rank 0's metrics: seconds per step (median of the timed steps), and per step the
host's update (the CPU table's AdamW over this rank's shard), the update's wait for the gradient
shards (they come down on the copy stream during backward) and the parameters' copies up, the share of the
host's update that ran behind backward (without clipping), the collectives' busy time, the swap files'
waits, and the rest (forward, backward and the device's own arithmetic); the device's peak, the
bytes of model states on the device and in pinned host memory. The sim device runs the CPU's
kernels, so its "device compute" is this machine's CPU: the split, not the speed, is the figure.

usage: bench/offload_device.py [--steps 6] [--stages 1,2,3] [--out bench/offload_device_results.jsonl] [--markdown]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "build", "zerotrain")
# gpt_sotu.json clips gradients (1.0): the host's update waits for the norm, after backward; without
# clipping it runs behind backward, and with super_offload it speculates there (Note [host update overlap]).
PLACEMENTS = {"device": [], "cpu": ["zero_optimization.offload_optimizer.device=cpu"],
              "cpu, no clipping": ["zero_optimization.offload_optimizer.device=cpu", "gradient_clipping=0"],
              "cpu, super_offload": ["zero_optimization.offload_optimizer.device=cpu",
                                     "zero_optimization.offload_optimizer.super_offload=true"],
              "cpu, super_offload, clipping 100": ["zero_optimization.offload_optimizer.device=cpu",
                                                   "zero_optimization.offload_optimizer.super_offload=true",
                                                   "gradient_clipping=100"],
              "nvme": None}


def run(stage, placement, steps, work):
    run_dir = os.path.join(work, f"s{stage}_{placement.replace(', ', '_').replace(' ', '_')}")
    extra = PLACEMENTS[placement]
    if extra is None:
        extra = ["zero_optimization.offload_optimizer.device=nvme",
                 "zero_optimization.offload_optimizer.nvme_path=" + os.path.join(work, "swap")]
    cmd = ["mpirun", "--oversubscribe", "-np", "2", BIN, "train", "--config", "configs/gpt_sotu.json",
           "run.device=sim", "bf16.enabled=true", f"zero_optimization.stage={stage}", f"run.max_steps={steps}",
           "steps_per_print=1", "data.eval_every=0", "run.eval_at_end=false", "run.dir=" + run_dir] + extra
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    p = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"offload_device: {' '.join(cmd)} failed:\n{p.stderr[-2000:]}")
    recs = [json.loads(l) for l in open(os.path.join(run_dir, "metrics.jsonl")) if '"step"' in l]
    recs = [r for r in recs if "loss" in r]
    timed = recs[1:]  # the first step warms the allocator and the product paths
    deltas = [b["elapsed_s"] - a["elapsed_s"] for a, b in zip(recs, recs[1:])]
    per = lambda key, sub: (timed[-1][key][sub] - recs[0][key][sub]) / len(timed) if key in timed[-1] else 0.0
    comm = statistics.median(r["comm_overlap"]["reduce"]["busy_s"] + r["comm_overlap"]["gather"]["busy_s"]
                             for r in timed)
    step_s = statistics.median(deltas)
    row = {"stage": stage, "placement": placement, "s_per_step": round(step_s, 4),
           "host_update_s": round(per("offload", "update_s"), 4), "down_s": round(per("offload", "down_s"), 4),
           "up_s": round(per("offload", "up_s"), 4), "comm_busy_s": round(comm, 4),
           "swap_wait_s": round(per("swap", "io_wait_s"), 4),
           "device_peak": timed[-1]["device_memory"]["peak"],
           "device_states": sum(timed[-1]["device_memory"][t] for t in ("param", "grad", "master", "optim")),
           "pinned_states": sum(timed[-1]["pinned_memory"][t] for t in ("master", "optim")),
           "early_update_s": round(per("offload", "early_update_s"), 4),
           "early_wait_s": round(per("offload", "early_wait_s"), 4),
           "early_redone": timed[-1].get("offload", {}).get("early_redone", 0)}
    # The share of the host's update behind backward: what ran there less what the step waited for.
    row["host_hidden_fraction"] = (round(max(0.0, 1 - row["early_wait_s"] / row["early_update_s"]), 3)
                                   if row["early_update_s"] > 0 else 0.0)
    exposed = row["host_update_s"] - row["early_update_s"] + row["early_wait_s"]  # the update's time on the step's path
    row["rest_s"] = round(step_s - exposed - row["down_s"] - row["up_s"] - row["swap_wait_s"], 4)
    return row


def markdown(rows):
    mib = lambda b: f"{b / 2**20:,.1f}"
    out = ["| stage | optimizer states | s/step | host AdamW | of it behind backward | down | up | swap waits | "
           "collectives (busy) | rest | device peak MiB | states on device MiB | pinned host MiB |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['stage']} | {r['placement']} | {r['s_per_step']:.3f} | {r['host_update_s']:.4f} | "
                   f"{r['host_hidden_fraction']:.0%} | "
                   f"{r['down_s']:.4f} | {r['up_s']:.4f} | {r['swap_wait_s']:.4f} | {r['comm_busy_s']:.3f} | "
                   f"{r['rest_s']:.3f} | {mib(r['device_peak'])} | {mib(r['device_states'])} | "
                   f"{mib(r['pinned_states'])} |")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--stages", default="1,2,3")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "offload_device_results.jsonl"))
    ap.add_argument("--markdown", action="store_true")
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="zt_offload_device_")
    rows = []
    try:
        for stage in (int(s) for s in a.stages.split(",")):
            for placement in PLACEMENTS:
                row = run(stage, placement, a.steps, work)
                print(json.dumps(row), flush=True)
                rows.append(row)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    with open(a.out, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    if a.markdown:
        print(markdown(rows))


if __name__ == "__main__":
    main()
