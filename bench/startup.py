#!/usr/bin/env python3
"""Issue 32's start-up: seconds from launch to the start line a run prints once its engine is
built (Note [counter init]: each rank fills only its shard, on every thread), for this build
and, side by side in one invocation, a baseline build (--baseline-bin, e.g. one of an earlier
commit). GPT of configs/gpt_infinity.json (stage 3, states and parameters in swap files) at
N = 2 and the given shape; the run is stopped once that line appears (step 1 is not timed).

usage: bench/startup.py [--layers 12] [--width 2048] [--baseline-bin PATH] [--repeats 1] [--markdown]
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "build", "zerotrain")
READY = "zerotrain: rank 0:"  # printed after the engine is built, just before step 1


def time_to_step1(binary, layers, width, work):
    swap = os.path.join(work, "swap")
    cmd = ["mpirun", "--oversubscribe", "-np", "2", binary, "train", "--config", "configs/gpt_infinity.json",
           f"model.n_layer={layers}", f"model.n_embd={width}", "model.n_head=16", "run.max_steps=1",
           "run.save_weights=false", "run.dir=" + os.path.join(work, "run"),
           "zero_optimization.offload_optimizer.nvme_path=" + swap, "zero_optimization.offload_param.nvme_path=" + swap]
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    os.sync()  # the previous run's swap files written out and removed: each run starts with a quiet disk
    free_before = shutil.disk_usage("/var/tmp").free
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, cwd=ROOT, env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
                         start_new_session=True)
    seen, params, lines = None, None, []
    for line in p.stderr:
        lines = (lines + [line.rstrip()])[-20:]
        if "parameters (" in line and params is None:
            params = int(line.split("zerotrain: ")[1].split(" ")[0])
        if line.startswith(READY):
            seen = time.monotonic() - t0
            break
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()
    while True:  # the ranks gone too (freeing gigabytes takes a moment), before the next run starts
        try:
            os.killpg(p.pid, 0)
            time.sleep(0.05)
        except ProcessLookupError:
            break
    shutil.rmtree(work, ignore_errors=True)
    # The swap files' blocks (tens of GB at 4.8B) come back after the unlink: the next run reserves as many.
    for _ in range(600):
        if shutil.disk_usage("/var/tmp").free >= free_before - (1 << 30):
            break
        time.sleep(0.2)
    if seen is None:
        sys.exit(f"startup: {' '.join(cmd)} never printed '{READY}'; its last lines:\n" + "\n".join(lines))
    return params, seen


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--width", type=int, default=2048)
    ap.add_argument("--baseline-bin", default="")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--markdown", action="store_true")
    a = ap.parse_args()
    rows = []
    for _ in range(a.repeats):
        for name, binary in (("baseline", a.baseline_bin), ("this build", BIN)):
            if not binary:
                continue
            params, s = time_to_step1(binary, a.layers, a.width, tempfile.mkdtemp(prefix="zt_startup_", dir="/var/tmp"))
            row = {"build": name, "layers": a.layers, "width": a.width, "parameters": params, "s_to_step1": round(s, 2)}
            print(json.dumps(row), flush=True)
            rows.append(row)
    if a.markdown:
        print("| build | layers x width | parameters | s to step 1 |\n|---|---|---|---|")
        for r in rows:
            print(f"| {r['build']} | {r['layers']} x {r['width']} | {r['parameters']:,} | {r['s_to_step1']:.1f} |")


if __name__ == "__main__":
    main()
