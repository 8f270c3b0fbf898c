#!/usr/bin/env python3
"""Issue 20's multi-host figures: GPTs trained at N = 4 on two test hosts (scripts/hosts.sh:
network namespaces with 2 ranks each, links capped by tc's token-bucket filter), each ZeRO stage
at each link rate; per run the mean step time and the bytes per step each host's link sent (its
veth counters over a long run minus a short one, so set-up and the final save cancel out)
against docs/design.md's volume: (M-1)/M of 2 Psi (stages 0-2) or 3 Psi (stage 3) elements per host
(each of its L ranks sends (M-1)/M of a 1/L share), M = 2 hosts. Standard library only; needs root (namespaces).

usage: bench/multihost.py [--rates 1gbit,10gbit] [--stages 0,1,2,3] [--models gpt_5m,gpt_30m]
                          [--steps 6] [--out bench/multihost_results.jsonl] [--markdown]
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time

HOSTS = "scripts/hosts.sh"
# GPT on the GPT-2 token shards (vocab 50257): "5M" is 4 layers of 96, "30M" the gpt_sotu config.
MODELS = {"gpt_5m": ["model.n_layer=4", "model.n_embd=96", "model.n_head=4"], "gpt_30m": []}
CONFIG = "configs/gpt_sotu.json"


def sh(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def sent_bytes():
    out = sh([HOSTS, "bytes"]).stdout.split()
    return [int(out[i + 2]) for i in range(0, len(out), 5)]  # "NAME tx N rx N" per host


def train(a, model, stage, steps, run_dir, extra=()):
    """One run on the hosts; returns (metrics lines, bytes each host sent, parameters, dtype)."""
    shutil.rmtree(run_dir, ignore_errors=True)
    over = MODELS[model] + list(extra) + [f"zero_optimization.stage={stage}", f"run.max_steps={steps}", "run.eval_at_end=false",
                            "steps_per_print=1", "train_batch_size=16", "train_micro_batch_size_per_gpu=4",
                            f"run.dir={run_dir}"]
    before = sent_bytes()
    p = sh([HOSTS, "mpirun", "-np", "4", os.path.abspath(a.bin), "train", "--config", CONFIG] + over)
    if p.returncode != 0:
        sys.exit(f"{model} stage {stage} failed ({p.returncode}):\n{p.stderr[-3000:]}")
    sent = [x - y for x, y in zip(sent_bytes(), before)]
    head = re.search(r"(\d+) parameters \((\d+) padded\)", p.stderr)
    metrics = [json.loads(line) for line in open(os.path.join(run_dir, "metrics.jsonl")) if line.startswith("{")]
    shutil.rmtree(run_dir, ignore_errors=True)
    bf16 = json.load(open(CONFIG)).get("bf16", {}).get("enabled", False)
    return metrics, sent, int(head.group(2)), "bf16" if bf16 else "fp32", \
        " ".join([HOSTS, "mpirun", "-np", "4", a.bin, "train", "--config", CONFIG] + over)


def step_times(metrics):
    t = [m["elapsed_s"] for m in metrics if "step" in m and "loss" in m]
    d = [b - a for a, b in zip(t, t[1:])]  # from step 2: the first includes warm-up
    return sum(d) / len(d) if d else None


def take_hosts(a):
    """Test hosts are one set per machine: refuse them while another run may hold them."""
    if sh([HOSTS, "status"]).returncode == 0 and not a.force:
        sys.exit("the test hosts are up: another run may be using them (scripts/hosts.sh status); --force to take them")


def run_all(a):
    take_hosts(a)
    rows = []
    for rate in a.rates.split(","):
        up = sh([HOSTS, "up", "2", rate])
        if up.returncode != 0:
            sys.exit(f"hosts.sh up failed: {up.stderr.strip()}")
        try:
            for model in a.models.split(","):
                for stage in map(int, a.stages.split(",")):
                    short, s_sent, psi, dtype, _ = train(a, model, stage, 2, "runs/multihost/short")
                    long_, l_sent, _, _, cmd = train(a, model, stage, 2 + a.steps, "runs/multihost/long")
                    per_step = [(l - s) / a.steps for l, s in zip(l_sent, s_sent)]
                    elem = 2 if dtype == "bf16" else 4
                    # Each rank sends (M-1)/M of its 1/L share across (Note [hierarchical groups]): per
                    # host k Psi (M-1)/M elements, k = 2 (stages 0-2) or 3; M = 2 hosts.
                    design = (3 if stage == 3 else 2) * psi * elem * (2 - 1) / 2
                    row = {"bench": "multihost", "rate": rate, "model": model, "stage": stage, "parameters": psi,
                           "dtype": dtype, "step_s": step_times(long_), "sent_per_step": per_step,
                           "design_per_step": design, "cmd": cmd, "date": time.strftime("%Y-%m-%d")}
                    print(json.dumps(row), flush=True)
                    rows.append(row)
        finally:
            sh([HOSTS, "down"])
    return rows


def markdown(rows):
    out = ["## Across two hosts (issue 20)", "",
           "Written by `bench/multihost.py --markdown` from its own runs (not part of `bench/run.sh`). Two test "
           "hosts on this machine (`scripts/hosts.sh`: network namespaces, 2 ranks each, `comm backend shm+mpi`), "
           "links capped with tc's token-bucket filter (no netem on this kernel, so no added latency), N = 4 "
           "sharing the machine's 2 cores, global batch 16, bf16. Sent/step is what each host's link carried per "
           "step (veth counters of a long run minus a short one); design is docs/design.md's volume per host: half of "
           "2Ψ (stages 0-2) or 3Ψ (stage 3) elements, each rank sending half of its 1/2 share across. At stage 3 "
           "the units under stage3_param_persistence_threshold (1e5) stay gathered and the tied wte stays "
           "gathered between its two uses (stage3_max_reuse_distance), so less than 3Ψ crosses.", "",
           "| model | link | stage | parameters | s/step | sent/step host 1 | host 2 | design | ratio |",
           "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        mb = [f"{x / 1e6:.2f} MB" for x in r["sent_per_step"]]
        out.append(f"| {r['model']} | {r['rate']} | {r['stage']} | {r['parameters']:,} | {r['step_s']:.2f} | "
                   f"{mb[0]} | {mb[1]} | {r['design_per_step'] / 1e6:.2f} MB | "
                   f"{max(r['sent_per_step']) / r['design_per_step']:.3f} |")
    cmds = sorted({re.sub(r"zero_optimization.stage=\d", "zero_optimization.stage=S",
                          re.sub(r"run.max_steps=\d+", "run.max_steps=K", r["cmd"])) for r in rows})
    return out + ["", "Commands (S the stage; K = 2 and 2 + steps; after `scripts/hosts.sh up 2 RATE`):", ""] + \
        [f"- `{c}`" for c in cmds] + [""]


def bench_main(p, out, run, to_markdown):
    """The host benchmarks' common tail: --bin, --out, --markdown, --force; then either print the
    BENCHMARKS.md section from --out, or run (rows of JSON) and write --out."""
    p.add_argument("--bin", default="build/zerotrain")
    p.add_argument("--out", default=out)
    p.add_argument("--markdown", action="store_true", help="print BENCHMARKS.md's section from --out, run nothing")
    p.add_argument("--force", action="store_true", help="take the test hosts even if they are up")
    a = p.parse_args()
    if a.markdown:
        print("\n".join(to_markdown([json.loads(line) for line in open(a.out) if line.startswith("{")])))
        return None
    rows = run(a)
    with open(a.out, "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rates", default="1gbit,10gbit")
    p.add_argument("--stages", default="0,1,2,3")
    p.add_argument("--models", default="gpt_5m,gpt_30m")
    p.add_argument("--steps", type=int, default=6)
    bench_main(p, "bench/multihost_results.jsonl", run_all, markdown)


if __name__ == "__main__":
    main()
