#!/usr/bin/python3
"""Runs train_own_module alone and at N = 2 at ZeRO stages 0-3 and checks that every run follows
the single process: each step's loss and the final parameters' sum of squares within 1e-5
(relative; fp32 runs differ by reduction order only). scripts/test.sh runs this against the
example built on an installed prefix (Note [installed package]).

  examples/check.py BINARY [MPIRUN]
"""
import json
import shlex
import subprocess
import sys


def run(cmd):
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        sys.exit("%s: exit %d\n%s%s" % (" ".join(cmd), out.returncode, out.stdout, out.stderr))
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]


def close(a, b, tol=1e-5):
    return abs(a - b) <= tol * max(1.0, abs(b))


def main():
    binary = sys.argv[1]
    mpirun = shlex.split(sys.argv[2] if len(sys.argv) > 2 else "mpirun --oversubscribe")
    want = run([binary, "--stage", "0"])
    bad = []
    for stage in range(4):
        got = run(mpirun + ["-np", "2", binary, "--stage", str(stage)])
        for g, w in zip(got, want):
            for key in ("loss", "params_sum_sq"):
                if key in w and not close(g[key], w[key]):
                    bad.append("stage %d, N = 2, %s %s: %.9g vs one process %.9g" %
                               (stage, "step %d" % w["step"] if "step" in w else "final", key, g[key], w[key]))
        if len(got) != len(want):
            bad.append("stage %d, N = 2: %d lines, one process %d" % (stage, len(got), len(want)))
    if want[-1]["params_sum_sq"] == 0 or not want[0]["loss"] > want[-2]["loss"]:
        bad.append("one process did not train: losses %s" % [w.get("loss") for w in want])
    if bad:
        sys.exit("examples/check.py: " + "; ".join(bad))
    print("  train_own_module: stages 0-3 at N = 2 follow one process (%d steps, loss %.4f -> %.4f)" %
          (len(want) - 1, want[0]["loss"], want[-2]["loss"]))


if __name__ == "__main__":
    main()
