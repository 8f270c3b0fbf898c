#!/usr/bin/python3
"""Runs train_own_module alone and at N = 2 at ZeRO stages 0-3 and checks that every run follows
the single process: each step's loss and the final parameters' sum of squares within 1e-5
(relative; fp32 runs differ by reduction order only). Then the train layer's pieces (Note [train
layer]): a run stopped at step 10 with checkpoints every 5 steps resumes from `latest` on the same
trajectory, and a memory budget below the in-memory peak puts the optimizer's states in swap files
(offload "auto") on the same trajectory too. scripts/test.sh runs this against the example built on
an installed prefix (Note [installed package]).

  examples/check.py BINARY [MPIRUN]
"""
import json
import shlex
import os
import subprocess
import sys
import tempfile


def run(cmd):
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        sys.exit("%s: exit %d\n%s%s" % (" ".join(cmd), out.returncode, out.stdout, out.stderr))
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]


def close(a, b, tol=1e-5):
    return abs(a - b) <= tol * max(1.0, abs(b))


def compare(what, got, want, bad):
    """Every step line of `got` and its final line against `want`'s of the same step."""
    steps = {w["step"]: w for w in want if "step" in w}
    for g in got:
        w = steps.get(g["step"]) if "step" in g else (want[-1] if "params_sum_sq" in g else None)
        for key in ("loss", "params_sum_sq"):
            if w is not None and key in g and key in w and not close(g[key], w[key]):
                bad.append("%s, %s %s: %.9g vs one process %.9g" %
                           (what, "step %d" % g["step"] if "step" in g else "final", key, g[key], w[key]))


def main():
    binary = sys.argv[1]
    mpirun = shlex.split(sys.argv[2] if len(sys.argv) > 2 else "mpirun --oversubscribe")
    want = run([binary, "--stage", "0"])
    bad, peaks = [], {}
    for stage in range(4):
        got = run(mpirun + ["-np", "2", binary, "--stage", str(stage)])
        peaks[stage] = got[0]["peak_bytes"]
        compare("stage %d, N = 2" % stage, got, want, bad)
        if len(got) != len(want):
            bad.append("stage %d, N = 2: %d lines, one process %d" % (stage, len(got), len(want)))
    with tempfile.TemporaryDirectory() as tmp:
        ck = ["--ckpt", os.path.join(tmp, "ck"), "--every", "5"]
        first = run(mpirun + ["-np", "2", binary, "--stage", "3", "--steps", "10"] + ck)
        again = run(mpirun + ["-np", "2", binary, "--stage", "3", "--resume"] + ck)
        if [g["step"] for g in again if "step" in g] != list(range(11, 21)):
            bad.append("resumed run: steps %s, not 11-20" % [g.get("step") for g in again])
        compare("stopped at step 10", first, want[:-1], bad)
        compare("resumed at step 10", again, want, bad)
        peak = peaks[2]
        budget = run(mpirun + ["-np", "2", binary, "--stage", "2", "--budget-kb", str(peak // 1024 - 1),
                               "--ckpt", os.path.join(tmp, "budget"), "--every", "100"])
        if "offload_optimizer nvme" not in budget[0]["placement"]:
            bad.append("a budget below the peak of %d bytes chose %s" % (peak, budget[0]["placement"]))
        compare("under a budget", budget, want, bad)
    if want[-1]["params_sum_sq"] == 0 or not want[1]["loss"] > want[-2]["loss"]:
        bad.append("one process did not train: losses %s" % [w.get("loss") for w in want])
    if bad:
        sys.exit("examples/check.py: " + "; ".join(bad))
    print("  train_own_module: stages 0-3 at N = 2, a resumed run and one under a memory budget follow one "
          "process (%d steps, loss %.4f -> %.4f)" % (len(want) - 2, want[1]["loss"], want[-2]["loss"]))


if __name__ == "__main__":
    main()
