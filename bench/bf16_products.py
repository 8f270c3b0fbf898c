#!/usr/bin/env python3
"""bf16 against fp32 on each product path (issue 32, Note [f32 compute] in src/zero/param_store.cpp):
GPT-2 124M at B4 x T64, one process, 2 threads, through build/bench/train/bench_gpt, on this processor
as it is and capped to AVX2 (ONEDNN_MAX_CPU_ISA=AVX2: no bf16 kernels, the issue's AVX2 machine's
path). Rows of one cycle run back to back, cycles interleave, so a busy moment hits every row alike;
each row's step is the median over cycles of bench_gpt's median step. JSON lines on stdout, or the
BENCHMARKS.md block with --markdown.

    python3 bench/bf16_products.py [--cycles 3] [--markdown]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, "build", "bench", "train", "bench_gpt")
MODEL = ["--name", "gpt2_124m_T64", "--layers", "12", "--embd", "768", "--heads", "12", "--vocab", "50257",
         "--ctx", "64", "--batch", "4", "--steps", "4", "--warmup", "1", "--threads", "2"]
# (processor cap, dtype, product settings): f32-per-product is the path before f32 compute.
ROWS = [("", "f32", ""), ("", "bf16", "native"), ("", "bf16", "f32"), ("", "bf16", "f32-per-product"),
        ("", "bf16", "auto"),
        ("AVX2", "f32", ""), ("AVX2", "bf16", "auto"), ("AVX2", "bf16", "f32-per-product")]


def run_row(cap, dtype, products):
    env = dict(os.environ)
    env.pop("ONEDNN_MAX_CPU_ISA", None)
    if cap:
        env["ONEDNN_MAX_CPU_ISA"] = cap
    cmd = [BENCH] + MODEL + ["--dtype", dtype] + (["--products", products] if products else [])
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
    rec = json.loads([l for l in p.stdout.splitlines() if l.startswith("{")][-1])
    line = [l for l in p.stderr.splitlines() if "products:" in l]
    rec["chosen_line"] = line[-1].split("products: ", 1)[1] if line else ""
    rec["cap"] = cap or "none"
    return rec


def cpu_name():
    """The model name, family and the vector extensions that decide the bf16 path."""
    name, family, flags = "unknown", "", set()
    for l in open("/proc/cpuinfo"):
        key, _, val = l.partition(":")
        key = key.strip()
        if key == "model name" and name == "unknown":
            name = val.strip()
        elif key == "cpu family" and not family:
            family = val.strip()
        elif key == "flags" and not flags:
            flags = set(val.split())
    isa = [label for flag, label in (("avx512f", "AVX-512"), ("avx512_bf16", "AVX512-BF16"), ("amx_bf16", "AMX"))
           if flag in flags] or (["AVX2 only"] if "avx2" in flags else ["no AVX2"])
    return f"{name} (family {family}) with {', '.join(isa)}" if family else f"{name} with {', '.join(isa)}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cycles", type=int, default=3)
    ap.add_argument("--markdown", action="store_true")
    a = ap.parse_args()
    if not os.path.exists(BENCH):
        sys.exit(f"bf16_products.py: {BENCH} is not built (scripts/build.sh build)")
    steps = {r: [] for r in ROWS}
    last = {}
    for _ in range(a.cycles):
        for r in ROWS:
            rec = run_row(*r)
            steps[r].append(rec["step_s"])
            last[r] = rec
    out = []
    for r in ROWS:
        rec = dict(last[r], bench="bf16_products", step_s_cycles=steps[r], step_s=statistics.median(steps[r]))
        f32 = statistics.median(steps[(r[0], "f32", "")])
        rec["vs_f32_step"] = rec["step_s"] / f32
        out.append(rec)
    if not a.markdown:
        for rec in out:
            print(json.dumps(rec))
        return
    load = os.getloadavg()
    print("### bf16 against fp32 on each product path (issues 20, 32), GPT-2 124M at B4 x T64, one process, 2 threads\n")
    print(f"`python3 bench/bf16_products.py --cycles {a.cycles} --markdown` on {cpu_name()} ({os.cpu_count()} cores; "
          f"load average {load[0]:.1f} after the run). `native` = oneDNN's bf16 kernels; `f32` = the model computes "
          "in f32 over its bf16 weights widened once per step (Note [f32 compute]); `f32-per-product` = the path "
          "before it (weights and activations in bf16, every product widening its operands); `auto` = rank 0's "
          "choice. Cap AVX2 = `ONEDNN_MAX_CPU_ISA=AVX2`, no bf16 kernels (the issue's AVX2 machine's path). Step = "
          "median over cycles of each run's median step; bf16/fp32 = the step against the same cap's fp32 step.\n")
    print("| cap | dtype | products | path taken | step s (cycles) | bf16/fp32 step | final loss | peak MiB |")
    print("|---|---|---|---|---|---|---|---|")
    for rec in out:
        cyc = "/".join(f"{s:.3f}" for s in rec["step_s_cycles"])
        print(f"| {rec['cap']} | {rec['dtype']} | {rec.get('products_setting', '–')} | "
              f"{rec['chosen_line'] or '–'} | {rec['step_s']:.3f} ({cyc}) | {rec['vs_f32_step']:.3f}x | "
              f"{rec['final_loss']:.4f} | {rec['peak_mib']:.0f} |")


if __name__ == "__main__":
    main()
