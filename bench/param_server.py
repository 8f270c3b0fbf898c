#!/usr/bin/env python3
"""Issue 20's parameter-server baseline against ZeRO: the 5M GPT of bench/multihost.py at N = 4 on two
test hosts (scripts/hosts.sh: network namespaces with 2 ranks each, links capped by tc's token-bucket
filter), trained by ZeRO stages 1, 2, 3 and by the parameter server (run.strategy=parameter_server,
S servers on host 1, the workers on both hosts; Note [parameter server] in src/zero/param_server.h).
Per run: peak memory per rank (the allocator's peak from metrics.jsonl; the parameter server's
records list every rank's), the bytes each host's link sent and received per step (veth counters of
a long run minus a short one, so set-up and the final save cancel out), the busiest link's figure,
the mean step time, and the final loss (the same global batch, so the same trajectory up to bf16
rounding). Standard library only; needs root (namespaces). The test hosts are the machine's: `up` and
`down` end whatever runs inside them, so this refuses to start while they are up (another bench using
them) unless --force.

usage: bench/param_server.py [--rate 1gbit] [--steps 6] [--servers 1] [--out bench/param_server_results.jsonl]
                             [--markdown]
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import multihost  # noqa: E402

HOSTS = "scripts/hosts.sh"
CONFIG = "configs/gpt_sotu.json"
# bench/multihost.py's gpt_5m; global batch 12 = 3 x 4 ZeRO ranks = 4 x 3 workers (S = 1), dropout 0.
MODEL = ["model.n_layer=4", "model.n_embd=96", "model.n_head=4", "train_batch_size=12",
         "train_micro_batch_size_per_gpu=null", "run.eval_at_end=false", "run.save_weights=false",
         "steps_per_print=1", "data.eval_every=0"]


def sh(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def link_bytes():
    """Per host: (sent, received) by its link so far."""
    out = sh([HOSTS, "bytes"]).stdout.split()
    return [(int(out[i + 2]), int(out[i + 4])) for i in range(0, len(out), 5)]  # "NAME tx N rx N"


def strategies(servers):
    out = [(f"ZeRO-{s}", [f"zero_optimization.stage={s}"]) for s in (1, 2, 3)]
    out.append((f"parameter server (S={servers})",
                ["run.strategy=parameter_server", f"run.parameter_servers={servers}"]))
    return out


def train(a, over, steps, run_dir):
    """One run on the hosts: (metrics records, bytes per host, padded parameters, command)."""
    shutil.rmtree(run_dir, ignore_errors=True)
    args = MODEL + over + [f"run.max_steps={steps}", f"run.dir={run_dir}"]
    cmd = [HOSTS, "mpirun", "-np", "4", os.path.abspath(a.bin), "train", "--config", CONFIG] + args
    before = link_bytes()
    p = sh(cmd)
    if p.returncode != 0:
        sys.exit(f"{' '.join(over)} failed ({p.returncode}):\n{p.stderr[-3000:]}")
    moved = [(t1 - t0, r1 - r0) for (t1, r1), (t0, r0) in zip(link_bytes(), before)]
    head = re.search(r"(\d+) parameters \((\d+) padded\)", p.stderr)
    metrics = [json.loads(line) for line in open(os.path.join(run_dir, "metrics.jsonl")) if line.startswith("{")]
    shutil.rmtree(run_dir, ignore_errors=True)
    shown = " ".join([HOSTS, "mpirun", "-np", "4", a.bin, "train", "--config", CONFIG] + args[:-1])
    return metrics, moved, int(head.group(2)), shown


def step_time(records):
    t = [m["elapsed_s"] for m in records]
    d = [b - a for a, b in zip(t, t[1:])]  # from step 2: the first includes warm-up
    return sum(d) / len(d) if d else None


def peaks(last):
    """Peak allocator bytes per role: ZeRO's ranks are alike (rank 0's record), the parameter server lists all."""
    if "memory_per_rank" not in last:
        return {"rank": last["memory"]["peak"]}, {"rank": last["rss_peak"]}
    mem, rss = {}, {}
    for r in last["memory_per_rank"]:
        mem[r["role"]] = max(mem.get(r["role"], 0), r["peak"])
        rss[r["role"]] = max(rss.get(r["role"], 0), r["rss_peak"])
    return mem, rss


def run_all(a):
    multihost.take_hosts(a)
    commit = sh(["git", "rev-parse", "--short", "HEAD"]).stdout.strip()
    up = sh([HOSTS, "up", "2", a.rate])
    if up.returncode != 0:
        sys.exit(f"hosts.sh up failed: {up.stderr.strip()}")
    rows = []
    try:
        for name, over in strategies(a.servers):
            _, short, psi, _ = train(a, over, 2, "runs/param_server/short")
            metrics, long_, _, cmd = train(a, over, 2 + a.steps, "runs/param_server/long")
            per_step = [[(l - s) / a.steps for l, s in zip(lt, st)] for lt, st in zip(long_, short)]
            records = [m for m in metrics if "loss" in m]
            mem, rss = peaks(records[-1])
            row = {"bench": "param_server", "rate": a.rate, "strategy": name, "parameters": psi, "dtype": "bf16",
                   "step_s": step_time(records), "link_per_step": per_step,
                   "busiest_per_step": max(max(h) for h in per_step), "peak": mem, "rss_peak": rss,
                   "losses": [m["loss"] for m in records], "cmd": cmd, "date": time.strftime("%Y-%m-%d"),
                   "commit": commit}
            print(json.dumps(row), flush=True)
            rows.append(row)
    finally:
        sh([HOSTS, "down"])
    return rows


def mib(b):
    return f"{b / 2**20:.1f} MiB"


def markdown(rows):
    psi = min(r["parameters"] for r in rows)  # the parameter server's: no padding at S = 1
    out = ["## Parameter server against ZeRO, across two hosts (issue 20)", "",
           f"Written by `bench/param_server.py --markdown` from its own runs ({rows[0]['date']}, commit "
           f"{rows[0].get('commit', '?')}; not part of "
           "`bench/run.sh`). The 5M GPT "
           f"of `bench/multihost.py` ({psi:,} parameters, bf16, AdamW, global batch 12) at N = 4 on two "
           f"test hosts (`scripts/hosts.sh`, 2 ranks each, links capped at {rows[0]['rate']}), sharing the "
           "machine's 2 cores. ZeRO runs `comm backend shm+mpi`; the parameter server `mpi` (its pushes and pulls "
           "are point-to-point messages), its server(s) on host 1 with one worker, the other two workers on host "
           "2; the workers run micro-batches of 4 (12 / 3 workers), ZeRO's ranks of 3 (12 / 4), so a worker's "
           "activations are 4/3 of a ZeRO rank's. Peak is the allocator's peak per rank (model states, "
           "activations, buffers; a server's is its model states exactly, 18Ψ/S + 4Ψ/S by Note "
           "[parameter-server memory]); tx/rx what each host's "
           "link sent and received per step (veth counters of a long run minus a short one); busiest the larger "
           "direction of the busier link. Per Note [parameter-server traffic] the server receives and sends W × Ψ/S "
           "elements a step (here the two workers on host 2 cross the link: 2Ψ each way, "
           f"{2 * psi * 2 / 1e6:.1f} MB), ZeRO about Ψ (stages 1-2) or 1.5Ψ (stage 3) each way per host.", "",
           "| strategy | peak per rank | RSS peak | s/step | host 1 tx / rx per step | host 2 tx / rx per step | "
           "busiest link per step | loss at step 2 | final loss |",
           "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        peak = " / ".join(f"{k} {mib(v)}" if k != "rank" else mib(v) for k, v in sorted(r["peak"].items(), reverse=True))
        rss = " / ".join(f"{k} {mib(v)}" if k != "rank" else mib(v) for k, v in sorted(r["rss_peak"].items(), reverse=True))
        hosts = [f"{t / 1e6:.2f} / {x / 1e6:.2f} MB" for t, x in r["link_per_step"]]
        out.append(f"| {r['strategy']} | {peak} | {rss} | {r['step_s']:.2f} | {hosts[0]} | {hosts[1]} | "
                   f"{r['busiest_per_step'] / 1e6:.2f} MB | {r['losses'][1]:.4f} | {r['losses'][-1]:.4f} |")
    ps, z = rows[-1], {r["strategy"]: r for r in rows}
    if "ZeRO-2" in z and "server" in ps["peak"]:
        out += ["", f"The parameter server's busiest link carries {ps['busiest_per_step'] / z['ZeRO-2']['busiest_per_step']:.2f}x "
                f"ZeRO-2's and {ps['busiest_per_step'] / z['ZeRO-3']['busiest_per_step']:.2f}x ZeRO-3's per step, "
                "(a server's link carries W/S times a worker's volume, so it grows with every worker added); its "
                "server holds "
                f"{ps['peak']['server'] / psi:.1f} bytes per parameter (the formula's 22: 18 of states, 4 of receive "
                f"buffers), its workers the whole model and gradients beside their activations. Every strategy ends "
                f"at the same loss ({ps['losses'][-1]:.4f}) after {len(ps['losses'])} steps."]
    cmds = sorted({re.sub(r"run.max_steps=\d+", "run.max_steps=K", r["cmd"]) for r in rows})
    return out + ["", "Commands (K = 2 and 2 + steps; after `scripts/hosts.sh up 2 RATE`; "
                  f"`bench/param_server.py --rate {rows[0]['rate']}` runs them all):", ""] + \
        [f"- `{c}`" for c in cmds] + [""]


def main():
    if os.geteuid() == 0:  # as the scripts do: Open MPI refuses root without these
        os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
        os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rate", default="1gbit")
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--servers", type=int, default=1)
    rows = multihost.bench_main(p, "bench/param_server_results.jsonl", run_all, markdown)
    if rows:
        print("\n".join(markdown(rows)))


if __name__ == "__main__":
    main()
