#!/usr/bin/env python3
"""Issue 54's Llama figures, one command: the CPU step of a Llama of SmolLM-135M's shape (30 layers,
576 wide, 9 heads on 3 key/value heads, SwiGLU 1536, tied head; GPT-2's vocabulary of 50,257 since the
corpus is GPT-2 tokens) at N = 2 beside PyTorch 1.13 running the same model class (Hugging Face's
LlamaForCausalLM in plain torch, tests/oracle/gen_llama_oracle.py) on the same tokens with the same
AdamW (bench/torch_gpt.py --family llama), and the allocator's peak per rank at stages 0-3 of
`zerotrain train` with that shape and the stage-3 limits a memory-minded user sets (no prefetch, no
reuse, one unit live). Writes bench/llama_results.jsonl and its block of BENCHMARKS.md.

usage: bench/llama.py [--ctx 512] [--steps 3] [--dtypes f32,bf16] [--no-markdown]
Needs build/zerotrain and build/bench/train/bench_gpt (ZT_BUILD_TARGET="zerotrain bench_gpt" scripts/build.sh)
and data/tokens/english_gpt2 (scripts/run.sh's set-up, or `zerotrain prepare --tokenizer gpt2`).
"""
import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
SHAPE = ["--family", "llama", "--name", "llama_135m", "--layers", "30", "--embd", "576", "--heads", "9",
         "--kv-heads", "3", "--ffn", "1536", "--vocab", "50257", "--tie", "1"]
LIMITS = ["zero_optimization.stage3_prefetch_bucket_size=0", "zero_optimization.stage3_max_live_parameters=0",
          "zero_optimization.stage3_max_reuse_distance=0"]
BEGIN, END = "<!-- llama.py: begin -->", "<!-- llama.py: end -->"


def json_lines(cmd):
    out = subprocess.run(cmd, cwd=ROOT, env=ENV, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit("bench/llama.py: %s failed (%d): %s" % (" ".join(cmd), out.returncode, out.stderr[-2000:]))
    return [json.loads(l) for l in out.stdout.splitlines() if l.startswith("{")], " ".join(cmd)


def steps(args):
    rows = []
    common = SHAPE + ["--ctx", str(args.ctx), "--batch", "1", "--steps", str(args.steps), "--warmup", "1",
                      "--dtype", args.dtypes]
    zt, zcmd = json_lines(["mpirun", "--oversubscribe", "-np", "2", "build/bench/train/bench_gpt"] + common +
                          ["--stages", "0", "--threads", "1", "--products", "native"])
    pt, pcmd = json_lines(["/usr/bin/python3", "bench/torch_gpt.py"] + common +
                          ["--world", "2", "--threads", "1", "--variants", "ddp"])
    for r in zt:
        r["cmd"] = zcmd
    for r in pt:
        r["cmd"] = pcmd
    return zt + pt


def peaks(args, work):
    rows = []
    for stage in range(4):
        run_dir = os.path.join(work, "stage%d" % stage)
        cmd = ["mpirun", "--oversubscribe", "-np", "2", "build/zerotrain", "train", "--config",
               "configs/llama_135m.json", "data.seq_len=%d" % args.ctx, "train_batch_size=2",
               "train_micro_batch_size_per_gpu=1", "zero_optimization.stage=%d" % stage, "run.max_steps=1",
               "run.eval_at_end=false", "run.save_weights=false", "data.eval_every=0", "run.bf16_products=native",
               "run.dir=" + run_dir] + LIMITS
        out = subprocess.run(cmd, cwd=ROOT, env=ENV, capture_output=True, text=True)
        if out.returncode != 0:
            sys.exit("bench/llama.py: %s failed: %s" % (" ".join(cmd), out.stderr[-2000:]))
        recs = [json.loads(l) for l in open(os.path.join(run_dir, "metrics.jsonl"))]
        step, start = recs[-2], recs[0]
        rows.append({"bench": "llama_peak", "stage": stage, "world": 2, "ctx": args.ctx,
                     "peak_mib": round(step["memory"]["peak"] / 2**20, 1),
                     "activation_peak_mib": round(step["memory_peak"]["activation"] / 2**20, 1),
                     "planned_activations_mib": round(start["memory_plan"]["activations"] / 2**20, 1),
                     "planned_total_mib": round(start["memory_plan"]["total"] / 2**20, 1),
                     "rss_peak_mib": round(step["rss_peak"] / 2**20, 1), "cmd": " ".join(cmd)})
    return rows


def markdown(rows, commit, date):
    steps_ = [r for r in rows if r.get("bench") == "gpt_train"]
    out = [BEGIN, "", "## Llama on the CPU (issue 54)", "",
           "Written by `bench/llama.py` (%s, %s): a Llama of SmolLM-135M's shape (30 layers, 576 wide, 9 heads on 3 "
           "key/value heads, SwiGLU 1536, tied head, GPT-2's vocabulary) at N = 2, one thread a rank, 1 x %d tokens "
           "a rank. PyTorch: the same model class (Hugging Face's LlamaForCausalLM in plain torch), tokens and AdamW, "
           "gloo DDP, bf16 under autocast. Time ratio = zerotrain's step / PyTorch's (goal: at most 0.5)."
           % (date, commit, steps_[0]["ctx"] if steps_ else 0), "",
           "| dtype | params | zerotrain step s | zerotrain tok/s | PyTorch step s | PyTorch tok/s | time ratio |",
           "|---|---|---|---|---|---|---|"]
    for dt in ("f32", "bf16"):
        z = next((r for r in steps_ if r["impl"] == "zerotrain" and r["dtype"] == dt), None)
        p = next((r for r in steps_ if r["impl"] == "pytorch" and r["dtype"] == dt), None)
        if z and p:
            out.append("| %s | %s | %.2f | %.1f | %.2f | %.1f | %.2fx |" % (
                dt, "{:,}".format(z["params"]), z["step_s"], z["tokens_per_s"], p["step_s"], p["tokens_per_s"],
                z["step_s"] / p["step_s"]))
    out += ["", "PyTorch 1.13's f32 step is slow on this machine for every model (the GPT-2 124M rows above: 49 "
            "tokens/s in f32, 117 in bf16); the bf16 row is the comparison the goal names."]
    out += ["", "The allocator's peak per rank, bf16, `zerotrain train` at stages 0-3 with "
            "`stage3_prefetch_bucket_size=0 stage3_max_live_parameters=0 stage3_max_reuse_distance=0`; the plan's "
            "activations come from the dry run (Note [measured activations]):", "",
            "| stage | peak MiB (allocator) | planned total MiB | activation peak MiB | planned activations MiB "
            "| peak RSS MiB |", "|---|---|---|---|---|---|"]
    for r in (r for r in rows if r.get("bench") == "llama_peak"):
        out.append("| %d | %.1f | %.1f | %.1f | %.1f | %.1f |" % (
            r["stage"], r["peak_mib"], r["planned_total_mib"], r["activation_peak_mib"], r["planned_activations_mib"],
            r["rss_peak_mib"]))
    out += ["", "Commands: " + "; ".join(sorted({"`%s`" % r["cmd"] for r in rows if r.get("cmd")})[:3]) + " (and "
            "the same train command at each stage).", "", END]
    return "\n".join(out)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ctx", type=int, default=512)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--dtypes", default="f32,bf16")
    p.add_argument("--no-markdown", action="store_true")
    args = p.parse_args()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip()
    date = datetime.date.today().isoformat()
    with tempfile.TemporaryDirectory() as work:
        rows = steps(args) + peaks(args, work)
    with open(os.path.join(ROOT, "bench", "llama_results.jsonl"), "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    block = markdown(rows, commit, date)
    print(block)
    if not args.no_markdown:
        path = os.path.join(ROOT, "BENCHMARKS.md")
        text = open(path).read()
        b, e = text.find(BEGIN), text.find(END)
        text = text[:b] + block + text[e + len(END):] if 0 <= b < e else text.rstrip("\n") + "\n\n" + block + "\n"
        with open(path, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
