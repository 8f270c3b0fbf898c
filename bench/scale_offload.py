#!/usr/bin/env python3
"""Issue 18's scale runs: GPTs trained at ZeRO stage 3 with their optimizer states and parameters
in swap files (ZeRO-Infinity on a CPU node), each step split into computation, disk read, disk
write and communication, and each rank's OS peak RSS (/usr/bin/time's maximum resident set, the
kernel's VmHWM) beside the allocator's peak and the per-rank budget. Standard library only.

usage: bench/scale_offload.py RUN [RUN ...] [--out RESULTS.jsonl] [--markdown]
  RUN = label:overrides, e.g. "budget:model.n_layer=36 model.n_embd=1536 run.memory_budget_mb=1700"

Every run is `mpirun -np N /usr/bin/time build/zerotrain train --config CONFIG OVERRIDES`; its JSON
line carries that command. --markdown prints the BENCHMARKS.md section for the lines of --out.
Minutes per run (a 1B-parameter GPT: about 40 s a step on 2 cores); nothing here asserts.
"""
import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time

RSS = "zt_rss_kb"


def model_states_bytes(params, dtype, state_bytes):
    """All ranks' model states in memory: parameters and gradients in the working dtype, the fp32
    master of 16-bit runs and the optimizer states (docs/design.md's 2+2+12 bytes/param in bf16)."""
    pb = 4 if dtype == "fp32" else 2
    return params * (2 * pb + (0 if dtype == "fp32" else 4) + state_bytes)


def steps_of(metrics):
    """Per step: wall time and its split. swap and comm figures are rank 0's; swap is cumulative."""
    out, prev_t, prev_swap = [], 0.0, {"read_wait_s": 0.0, "write_wait_s": 0.0, "update_s": 0.0}
    for m in metrics:
        if "step" not in m or "loss" not in m:
            continue
        t = m["elapsed_s"]
        swap = m.get("swap", prev_swap)
        d = {k: swap.get(k, 0.0) - prev_swap.get(k, 0.0) for k in prev_swap}
        comm = sum(m.get("comm_overlap", {}).get(k, {}).get("blocked_s", 0.0) for k in ("reduce", "gather"))
        step_s = t - prev_t
        out.append({"step": m["step"], "loss": m["loss"], "step_s": step_s, "disk_read_s": d["read_wait_s"],
                    "disk_write_s": d["write_wait_s"], "comm_s": comm, "optimizer_s": d["update_s"],
                    "compute_s": max(0.0, step_s - d["read_wait_s"] - d["write_wait_s"] - comm),
                    "gathers": m.get("gathers"), "alloc_peak": m.get("memory", {}).get("peak")})
        prev_t, prev_swap = t, swap
    return out


def run_one(label, overrides, a):
    run_dir = os.path.join(a.runs, label)
    shutil.rmtree(run_dir, ignore_errors=True)
    over = shlex.split(overrides) + [f"run.dir={run_dir}"]
    est = subprocess.run([a.bin, "estimate", "--config", a.config, "--world", str(a.np), "--json"] + over,
                         capture_output=True, text=True)
    if est.returncode != 0:
        sys.exit(f"estimate failed: {est.stderr.strip()}")
    e = json.loads(est.stdout)
    cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(a.np), "/usr/bin/time", "-f",
           f"{RSS} %M", a.bin, "train", "--config", a.config] + over
    t0 = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.time() - t0
    if p.returncode != 0:
        sys.exit(f"{label} failed ({p.returncode}):\n{p.stderr[-3000:]}")
    rss = [int(x) * 1024 for x in re.findall(RSS + r" (\d+)", p.stderr)]
    metrics = [json.loads(line) for line in open(os.path.join(run_dir, "metrics.jsonl")) if line.startswith("{")]
    budget = next((int(o.split("=")[1]) << 20 for o in over if o.startswith("run.memory_budget_mb=")), None)
    states = model_states_bytes(e["parameters"], e["dtype"], e["optimizer_state_bytes_per_param"])
    steps = steps_of(metrics)
    plan = next((m["memory_plan"] for m in metrics if m.get("event") == "start" and "memory_plan" in m), {})
    row = {"bench": "scale_offload", "label": label, "parameters": e["parameters"], "dtype": e["dtype"],
           "world_size": a.np, "model_states_bytes": states, "budget_bytes": budget,
           "states_over_budget": states / budget if budget else None, "rss_peak_bytes": rss,
           "alloc_peak_bytes": max((s["alloc_peak"] or 0) for s in steps) if steps else None,
           "predicted_rss_bytes": plan.get("predicted_rss"), "predicted_in_use_bytes": plan.get("in_use"),
           "ram_bytes": machine_ram_bytes(), "steps": steps, "wall_s": wall, "offload": "offload_param" in p.stderr,
           "cmd": " ".join(shlex.quote(c) for c in cmd)}
    shutil.rmtree(run_dir, ignore_errors=True)  # the weights of a billion-parameter model: gigabytes
    return row


def machine_ram_bytes():
    with open("/proc/meminfo") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("MemTotal:"))


def gib(b):
    return f"{b / 2**30:.2f} GiB"


def markdown(rows):
    out = ["## Scale: training past the memory limit (issue 18)", "",
           "Written by `bench/scale_offload.py --markdown` from its own runs (not part of `bench/run.sh`: "
           "minutes per run). ZeRO stage 3 at N = 2, bf16, AdamW; OS peak RSS is each rank's maximum resident "
           "set (/usr/bin/time); model states are all ranks' parameters, gradients, fp32 master and Adam states "
           "as they would be in memory, and states/RAM sets them against the machine's whole memory (MemTotal). Step split: rank 0's time blocked on disk reads and writes and on "
           "collectives; compute is the rest (forward, backward, recompute, the optimizer's arithmetic).", "",
           "| run | parameters | model states | states/RAM | budget/rank | states/budget | OS peak RSS/rank | "
           "predicted RSS | allocator peak | s/step | read | write | comm | compute | loss by step |", "|" + "---|" * 15]
    cmds = []
    for i, r in enumerate(rows, 1):
        st = r["steps"][1:] or r["steps"]  # the first step also makes the trace and warms the caches
        mean = {k: sum(s[k] for s in st) / len(st) for k in ("step_s", "disk_read_s", "disk_write_s", "comm_s",
                                                             "compute_s")}
        out.append(f"| {r['label']} ({i}) | {r['parameters']:,} | {gib(r['model_states_bytes'])} | "
                   f"{r['model_states_bytes'] / r['ram_bytes']:.1f}x | "
                   f"{gib(r['budget_bytes']) if r['budget_bytes'] else '–'} | "
                   f"{'%.1fx' % r['states_over_budget'] if r['states_over_budget'] else '–'} | "
                   f"{' / '.join(gib(x) for x in r['rss_peak_bytes'])} | "
                   f"{gib(r['predicted_rss_bytes']) if r.get('predicted_rss_bytes') else '–'} | {gib(r['alloc_peak_bytes'])} | "
                   f"{mean['step_s']:.1f} | {mean['disk_read_s']:.1f} | {mean['disk_write_s']:.1f} | "
                   f"{mean['comm_s']:.1f} | {mean['compute_s']:.1f} | "
                   f"{', '.join('%.2f' % s['loss'] for s in r['steps'])} |")
        cmds.append(f"{i}. `{r['cmd']}`")
    return out + ["", "Commands:", ""] + cmds + [""]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("runs_", nargs="*", metavar="RUN")
    p.add_argument("--config", default="configs/gpt_infinity.json")
    p.add_argument("--np", type=int, default=2)
    p.add_argument("--bin", default="build/zerotrain")
    p.add_argument("--runs", default="runs/scale", help="run folders (removed after each run)")
    p.add_argument("--out", default="bench/scale_results.jsonl")
    p.add_argument("--markdown", action="store_true")
    a = p.parse_args()
    for spec in a.runs_:
        label, _, overrides = spec.partition(":")
        row = run_one(label, overrides, a)
        print(json.dumps(row), flush=True)
        with open(a.out, "a") as f:
            f.write(json.dumps(row) + "\n")
    if a.markdown:
        rows = [json.loads(line) for line in open(a.out) if line.startswith("{")]
        print("\n".join(markdown(rows)))


if __name__ == "__main__":
    main()
