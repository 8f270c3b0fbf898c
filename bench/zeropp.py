#!/usr/bin/env python3
"""Issue 20's ZeRO++ figures (Note [ZeRO++] in src/zero/wire.h), from one invocation:

traffic: plain stage 3 beside each ZeRO++ option and all three, GPT 5M and 30M at N = 4 on two
  test hosts (scripts/hosts.sh, 2 ranks each) with links capped at --rate: the bytes per step each
  host's link sent (veth counters, long run minus short, as bench/multihost.py), the cross-node
  bytes per step by the engine's own counters (metrics' cross_node_bytes, rank 0, times the 4
  ranks), and the step time.
parity: --parity-model (GPT 5M) for --parity-steps steps at N = --parity-ranks (4) on this machine as
  two "nodes" (ZT_COMM_NODE_RANKS=N/2: the same hierarchy, no link cap), each option in
  --parity-variants against plain stage 3: the final validation loss and its difference. At N = 2
  each "node" is one rank, so hpZ has nothing to serve there; qwZ and qgZ cross between the two.

usage: bench/zeropp.py [--rate 1gbit] [--models gpt_5m,gpt_30m] [--steps 6] [--parity-steps 200]
                       [--parity-model gpt_5m|gpt_30m] [--parity-ranks 4] [--parity-variants plain,qwZ,...]
                       [--skip traffic|parity] [--force]
                       [--out bench/zeropp_results.jsonl] [--markdown]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import multihost  # noqa: E402

VARIANTS = {
    "plain": [],
    "qwZ": ["zero_optimization.zero_quantized_weights=true"],
    "qgZ": ["zero_optimization.zero_quantized_gradients=true"],
    "hpZ": ["zero_optimization.zero_hpz_partition_size=2"],
    "all": ["zero_optimization.zero_quantized_weights=true", "zero_optimization.zero_quantized_gradients=true",
            "zero_optimization.zero_hpz_partition_size=2"],
    # All that applies where each "node" is one rank (parity at N = 2): no secondary partition.
    "qwZ+qgZ": ["zero_optimization.zero_quantized_weights=true", "zero_optimization.zero_quantized_gradients=true"],
}
# ZeRO's 3 gathers a step (every unit released after each use), where hpZ has backward gathers to serve.
REUSE0 = ["zero_optimization.stage3_max_reuse_distance=0"]


def variants():
    for name, extra in VARIANTS.items():
        yield name, "1e9", extra
    for name in ("plain", "all"):
        yield name, "0", VARIANTS[name] + REUSE0


def cross_node_per_step(metrics):
    c = [m["cross_node_bytes"] for m in metrics if "step" in m and "cross_node_bytes" in m]
    return 4 * (c[-1] - c[0]) / (len(c) - 1) if len(c) > 1 else None  # every rank alike


def traffic(a):
    multihost.take_hosts(a)
    rows = []
    up = multihost.sh([multihost.HOSTS, "up", "2", a.rate])
    if up.returncode != 0:
        sys.exit(f"hosts.sh up failed: {up.stderr.strip()}")
    try:
        for model in a.models.split(","):
            for name, reuse, extra in variants():
                _, s_sent, psi, _, _ = multihost.train(a, model, 3, 2, "runs/zeropp/short", extra)
                long_, l_sent, _, _, cmd = multihost.train(a, model, 3, 2 + a.steps, "runs/zeropp/long", extra)
                row = {"bench": "zeropp_traffic", "rate": a.rate, "model": model, "variant": name, "reuse": reuse,
                       "parameters": psi,
                       "step_s": multihost.step_times(long_),
                       "sent_per_step": [(x - y) / a.steps for x, y in zip(l_sent, s_sent)],
                       "cross_node_per_step": cross_node_per_step(long_), "cmd": cmd,
                       "date": time.strftime("%Y-%m-%d")}
                print(json.dumps(row), flush=True)
                rows.append(row)
    finally:
        multihost.sh([multihost.HOSTS, "down"])
    return rows


def parity(a):
    rows = []
    node = str(max(1, a.parity_ranks // 2))
    for name in a.parity_variants.split(","):  # DeepSpeed's reuse distance: the trajectory does not depend on it
        extra = VARIANTS[name]
        run_dir = "runs/zeropp/parity"
        shutil.rmtree(run_dir, ignore_errors=True)
        over = multihost.MODELS[a.parity_model] + extra + [
            "zero_optimization.stage=3", f"run.max_steps={a.parity_steps}", "run.eval_at_end=true",
            f"steps_per_print={a.parity_steps}", "train_batch_size=16", "train_micro_batch_size_per_gpu=4",
            f"run.dir={run_dir}"]
        cmd = ["mpirun", "--oversubscribe", "-np", str(a.parity_ranks), "-x", f"ZT_COMM_NODE_RANKS={node}", a.bin,
               "train", "--config", multihost.CONFIG] + over
        t0 = time.time()
        p = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, ZT_COMM_NODE_RANKS=node))
        if p.returncode != 0:
            sys.exit(f"parity {name} failed ({p.returncode}):\n{p.stderr[-3000:]}")
        metrics = [json.loads(x) for x in open(os.path.join(run_dir, "metrics.jsonl")) if x.startswith("{")]
        val = [m["val_loss"] for m in metrics if "val_loss" in m]
        train_loss = [m["loss"] for m in metrics if "loss" in m and "step" in m]
        row = {"bench": "zeropp_parity", "model": a.parity_model, "ranks": a.parity_ranks, "variant": name,
               "steps": a.parity_steps, "val_loss": val[-1],
               "train_loss": train_loss[-1], "wall_s": time.time() - t0, "cmd": " ".join(cmd),
               "date": time.strftime("%Y-%m-%d")}
        print(json.dumps(row), flush=True)
        rows.append(row)
    shutil.rmtree("runs/zeropp", ignore_errors=True)
    return rows


def markdown(rows):
    t = [r for r in rows if r["bench"] == "zeropp_traffic"]
    out = ["## ZeRO++ across two hosts (issue 20)", "",
           "Written by `bench/zeropp.py --markdown` from its own runs (not part of `bench/run.sh`). Stage 3 at "
           "N = 4 on two test hosts (`scripts/hosts.sh`, 2 ranks each, bf16, global batch 16, the same set-up as "
           "the table above), plain and with each ZeRO++ option (Note [ZeRO++] in src/zero/wire.h): qwZ = "
           "zero_quantized_weights, qgZ = zero_quantized_gradients (int4), hpZ = zero_hpz_partition_size 2 (the "
           "node), all = the three; reuse is stage3_max_reuse_distance (1e9, DeepSpeed's default, keeps units "
           "gathered from forward to backward; 0 gathers for every use, ZeRO's 3Ψ). Sent/step: each host's veth "
           "counters; counted: the engine's cross_node_bytes of the 4 ranks per step; both as a share of plain "
           "stage 3 at the same reuse in the last columns.", "",
           "| model | link | reuse | variant | s/step | sent/step host 1 | host 2 | counted/step | sent vs plain | "
           "counted vs plain |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    plain = {(r["model"], r["rate"], r.get("reuse")): r for r in t if r["variant"] == "plain"}
    for r in t:
        base = plain.get((r["model"], r["rate"], r.get("reuse")))
        sent, counted = max(r["sent_per_step"]), r["cross_node_per_step"] or 0
        rs = f"{sent / max(base['sent_per_step']):.3f}" if base else "-"
        rc = f"{counted / base['cross_node_per_step']:.3f}" if base and base["cross_node_per_step"] else "-"
        mb = [f"{x / 1e6:.2f} MB" for x in r["sent_per_step"]]
        out.append(f"| {r['model']} | {r['rate']} | {r.get('reuse')} | {r['variant']} | {r['step_s']:.2f} | {mb[0]} | {mb[1]} | "
                   f"{counted / 1e6:.2f} MB | {rs} | {rc} |")
    parity_rows = [r for r in rows if r["bench"] == "zeropp_parity"]
    for key in dict.fromkeys((r.get("model", "gpt_5m"), r.get("ranks", 4), r["steps"]) for r in parity_rows):
        p = [r for r in parity_rows if (r.get("model", "gpt_5m"), r.get("ranks", 4), r["steps"]) == key]
        model, ranks, steps = key
        base = next((r for r in p if r["variant"] == "plain"), None)
        out += ["", f"Loss parity: {model}, stage 3, N = {ranks} as two \"nodes\" on this machine "
                f"(ZT_COMM_NODE_RANKS={max(1, ranks // 2)}), {steps} steps, validation loss on the whole held-out split at the end:", "",
                "| variant | final train loss | final validation loss | difference from plain | wall time |",
                "|---|---|---|---|---|"]
        for r in p:
            d = f"{r['val_loss'] - base['val_loss']:+.4f}" if base else "-"
            out.append(f"| {r['variant']} | {r['train_loss']:.4f} | {r['val_loss']:.4f} | {d} | {r['wall_s'] / 60:.0f} min |")
    cmds = sorted({r["cmd"] for r in rows if r["variant"] in ("all", "qwZ+qgZ")})  # the others drop keys
    return out + ["", "Commands (ZeRO++ all; the other variants drop keys):", ""] + [f"- `{c}`" for c in cmds] + [""]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rate", default="1gbit")
    p.add_argument("--models", default="gpt_5m,gpt_30m")
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--parity-steps", type=int, default=200)
    p.add_argument("--parity-model", default="gpt_5m", choices=sorted(multihost.MODELS))
    p.add_argument("--parity-ranks", type=int, default=4, help="N; the two \"nodes\" hold N/2 ranks each")
    p.add_argument("--parity-variants", default=",".join(VARIANTS), help="of " + ",".join(VARIANTS))
    p.add_argument("--skip", default="", help="traffic or parity: leave that part out")
    multihost.bench_main(p, "bench/zeropp_results.jsonl",
                         lambda a: (traffic(a) if a.skip != "traffic" else []) + (parity(a) if a.skip != "parity" else []),
                         markdown)


if __name__ == "__main__":
    main()
