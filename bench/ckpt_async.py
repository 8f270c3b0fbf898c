#!/usr/bin/env python3
"""Issue 32's checkpoints that cost nothing (Note [background save] in src/ckpt): GPT 30M
(configs/gpt_sotu.json, bf16) at N = 2 saving a checkpoint after every step, in the foreground
(checkpoint.async=false) and in the background (true), beside the same run without checkpoints,
side by side in one invocation (rounds interleaved, so the machine's noise falls on all three).

Per row: seconds per step (median of the steps after the first, from rank 0's metrics), its
ratio to the run without checkpoints, and the seconds the steps waited for checkpoints in all
(summary.json's checkpoint_blocked_s: snapshots, or whole saves).

usage: bench/ckpt_async.py [--steps 8] [--stage 2] [--rounds 2] [--out bench/ckpt_async_results.jsonl] [--markdown]
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
MODES = {"none": [], "foreground": ["checkpoint.every_steps=1", "checkpoint.async=false"],
         "background": ["checkpoint.every_steps=1", "checkpoint.async=true"]}


def run(mode, stage, steps, work):
    run_dir = os.path.join(work, mode)
    cmd = ["mpirun", "--oversubscribe", "-np", "2", BIN, "train", "--config", "configs/gpt_sotu.json",
           f"zero_optimization.stage={stage}", f"run.max_steps={steps}", "steps_per_print=1", "data.eval_every=0",
           "run.eval_at_end=false", "run.save_weights=false", "checkpoint.keep_last=2", "run.dir=" + run_dir]
    cmd += MODES[mode]
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    p = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"ckpt_async: {' '.join(cmd)} failed:\n{p.stderr[-2000:]}")
    recs = [json.loads(l) for l in open(os.path.join(run_dir, "metrics.jsonl"))]
    steps_ = [r for r in recs if "loss" in r and "elapsed_s" in r]
    summary = next(r["summary"] for r in recs if r.get("event") == "final")
    deltas = [b["elapsed_s"] - a["elapsed_s"] for a, b in zip(steps_, steps_[1:])]
    shutil.rmtree(run_dir, ignore_errors=True)
    return statistics.median(deltas), summary.get("checkpoint_blocked_s", 0.0), summary["parameters"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--stage", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "ckpt_async_results.jsonl"))
    ap.add_argument("--markdown", action="store_true")
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="zt_ckpt_async_")
    got = {m: [] for m in MODES}
    try:
        for _ in range(a.rounds):
            for mode in MODES:
                got[mode].append(run(mode, a.stage, a.steps, work))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    base = statistics.median(s for s, _, _ in got["none"])
    rows = []
    for mode, runs in got.items():
        s = statistics.median(x for x, _, _ in runs)
        rows.append({"mode": mode, "stage": a.stage, "parameters": runs[0][2], "s_per_step": round(s, 4),
                     "ratio": round(s / base, 3), "blocked_s": round(statistics.median(b for _, b, _ in runs), 3),
                     "steps": a.steps, "rounds": a.rounds})
        print(json.dumps(rows[-1]), flush=True)
    with open(a.out, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    if a.markdown:
        print("| checkpoint every step | s/step | vs none | steps blocked on checkpoints (s, all steps) |\n"
              "|---|---|---|---|")
        for r in rows:
            print(f"| {r['mode']} | {r['s_per_step']:.3f} | {r['ratio']:.2f}x | {r['blocked_s']:.2f} |")


if __name__ == "__main__":
    main()
