#!/usr/bin/env python3
"""What the collective check costs (Note [collective signatures], issue 31).

Trains GPT 30M (configs/gpt_sotu.json) at N = 2 with run.check_collectives on and off, in
alternating runs (on, off, on, off, ...) so that a noisy shared machine slows both alike, on each
backend and stage asked for. Each run's step time is the median of its per-step times (the
metrics' elapsed_s, steps_per_print = 1) after the warm-up steps. Prints one JSON line per run and
one summary line per setting: the median over rounds of on / off, the check's cost per step.

usage: bench/collective_check.py [--rounds 3] [--steps 8] [--warmup 3] [--backends shm,mpi]
                                 [--stages 2,3] [--out FILE]
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


def run(args, backend, stage, check, folder):
    cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "2",
           os.path.join(args.build, "zerotrain"), "train", "--config", os.path.join(ROOT, "configs/gpt_sotu.json"),
           f"run.max_steps={args.steps}", "steps_per_print=1", "run.eval_at_end=false", "data.eval_every=0",
           "run.save_weights=false", f"run.comm_backend={backend}", f"zero_optimization.stage={stage}",
           f"run.check_collectives={'true' if check else 'false'}", f"run.dir={folder}"]
    subprocess.run(cmd, cwd=ROOT, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(os.path.join(folder, "metrics.jsonl")) as f:
        elapsed = [r["elapsed_s"] for r in map(json.loads, f) if "elapsed_s" in r]
    steps = [b - a for a, b in zip(elapsed, elapsed[1:])][args.warmup:]
    shutil.rmtree(folder)
    return {"bench": "collective_check", "backend": backend, "stage": stage, "check": check,
            "steps": len(steps), "step_s": statistics.median(steps), "command": " ".join(cmd)}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--warmup", type=int, default=3, help="per-step times left out at the start")
    p.add_argument("--backends", default="shm,mpi")
    p.add_argument("--stages", default="2,3")
    p.add_argument("--build", default=os.environ.get("ZT_BUILD_DIR", os.path.join(ROOT, "build")))
    p.add_argument("--out", help="also append the JSON lines here")
    args = p.parse_args()
    out = open(args.out, "a") if args.out else None

    def emit(rec):
        line = json.dumps(rec)
        print(line, flush=True)
        if out:
            out.write(line + "\n")

    scratch = tempfile.mkdtemp(prefix="zt_check_bench_")
    try:
        for backend in args.backends.split(","):
            for stage in map(int, args.stages.split(",")):
                ratios, on_s, off_s = [], [], []
                for k in range(args.rounds):
                    pair = {}
                    for check in (True, False) if k % 2 == 0 else (False, True):
                        rec = run(args, backend, stage, check, os.path.join(scratch, f"r{k}{check}"))
                        emit(rec)
                        pair[check] = rec["step_s"]
                    ratios.append(pair[True] / pair[False])
                    on_s.append(pair[True])
                    off_s.append(pair[False])
                emit({"bench": "collective_check_summary", "backend": backend, "stage": stage, "rounds": args.rounds,
                      "step_s_on": statistics.median(on_s), "step_s_off": statistics.median(off_s),
                      "on_over_off": statistics.median(ratios), "ratios": ratios})
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
