#!/usr/bin/env python3
"""Summary of a bench/run.sh results file (JSON lines): zerotrain / PyTorch ratios.

usage: summarize.py RESULTS.jsonl   -> one JSON object on stdout
Ratios > 1 mean zerotrain is faster for throughputs (samples/s, GB/s, GFLOP/s); step-time
ratios are zerotrain_ms / other_ms, so < 1 means zerotrain is faster. PyTorch numbers are keyed
by the BLAS its Debian build loaded ("reference" as installed, "openblas-openmp" when run.sh
puts OpenBLAS on its library path).
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from report import load  # noqa: E402  (bench/report.py: the JSON lines of a results file)


def ratio(a, b, digits=3):
    return round(a / b, digits) if a and b else None


def main(path):
    rows = load(path)
    train = [r for r in rows if r.get("bench") == "mlp_train"]
    # Throughput rows: the 784-256-256-10 MLP; rows of models over 1M parameters are the memory runs.
    memory = [r for r in train if r["impl"] == "zerotrain" and r.get("params", 0) > 1_000_000]
    zt_all = [r for r in train if r["impl"] == "zerotrain" and r.get("params", 0) <= 1_000_000]
    zt = [r for r in zt_all if r.get("dtype", "f32") == "f32"]
    pt_all = [r for r in train if r["impl"] == "pytorch"]
    pt = [r for r in pt_all if r.get("dtype", "f32") == "f32"]
    blases = sorted({r.get("blas", "unknown") for r in pt})
    out = {"results": path, "notes": "samples/s, GB/s, GFLOP/s ratios: zerotrain/pytorch (>1: zerotrain faster); "
                                    "step_ms ratios: zerotrain/other (<1: zerotrain faster); step_ms = median"}

    # Single process samples/s.
    zt1 = next((r for r in zt if r["world"] == 1), None)
    single = {"zerotrain_samples_per_s": zt1 and zt1["samples_per_s"], "threads": zt1 and zt1["threads"]}
    for blas in blases:
        p = next((r for r in pt if r["world"] == 1 and r.get("blas") == blas), None)
        if p:
            single[f"pytorch[{blas}]_samples_per_s"] = p["samples_per_s"]
            single[f"zerotrain_over_pytorch[{blas}]"] = ratio(zt1 and zt1["samples_per_s"], p["samples_per_s"])
    out["mlp_single_process"] = single

    # bf16 mixed precision, single process: zerotrain bf16 vs PyTorch CPU autocast (bf16).
    zb = next((r for r in zt_all if r["world"] == 1 and r.get("dtype") == "bf16"), None)
    bf = {"zerotrain_bf16_samples_per_s": zb and zb["samples_per_s"],
          "zerotrain_bf16_over_f32": ratio(zb and zb["samples_per_s"], zt1 and zt1["samples_per_s"])}
    for blas in blases:
        p = next((r for r in pt_all if r["world"] == 1 and r.get("dtype") == "bf16" and r.get("blas") == blas), None)
        if p:
            bf[f"pytorch_autocast[{blas}]_samples_per_s"] = p["samples_per_s"]
            bf[f"zerotrain_over_pytorch_autocast[{blas}]"] = ratio(zb and zb["samples_per_s"], p["samples_per_s"])
    out["mlp_bf16_single_process"] = bf

    # Peak memory per rank by stage (one process pair per stage): allocator's tagged peak, model
    # states at rest, and the operating system's peak RSS.
    mem = {}
    for r in memory:
        mem[f"{r['dtype']}/stage{r['stage']}"] = {k: r.get(k) for k in ("params", "world", "peak_mib", "states_mib",
                                                                       "peak_rss_mib")}
    out["peak_memory_per_rank"] = mem

    # Stages at world 2: step time vs zerotrain stage 0, torch DDP (stage 0) and torch ZeRO-1.
    ztw = {r["stage"]: r for r in zt if r["world"] > 1}
    stages = {}
    base = ztw.get(0)
    for s, r in sorted(ztw.items()):
        e = {"world": r["world"], "threads": r["threads"], "step_ms": r["step_ms"], "samples_per_s": r["samples_per_s"],
             "over_stage0": ratio(r["step_ms"], base and base["step_ms"])}
        for blas in blases:
            for tstage, name in ((0, "ddp"), (1, "zero1")):
                p = next((q for q in pt if q["world"] > 1 and q["stage"] == tstage and q.get("blas") == blas), None)
                if p:
                    e[f"over_torch_{name}[{blas}]"] = ratio(r["step_ms"], p["step_ms"])
        stages[f"stage{s}"] = e
    torch_w = {f"{q['variant']}[{q.get('blas')}]": q["step_ms"] for q in pt if q["world"] > 1}
    out["mlp_world2_step_ms"] = {"zerotrain": stages, "pytorch": torch_w}

    # Collectives: bus bandwidth per op and size.
    comm = {}
    zc = {(r["op"], r["bytes"]): r for r in rows if "busbw_GBps" in r and r.get("backend") != "gloo"}
    gc = {(r["op"], r["bytes"]): r for r in rows if "busbw_GBps" in r and r.get("backend") == "gloo"}
    for (op, nbytes), r in sorted(zc.items()):
        g = gc.get((op, nbytes))
        comm[f"{op}/{nbytes >> 20}MiB"] = {
            "zerotrain_backend": r["backend"], "zerotrain_busbw_GBps": r["busbw_GBps"],
            "gloo_busbw_GBps": g and g["busbw_GBps"],
            "zerotrain_over_gloo": ratio(r["busbw_GBps"], g and g["busbw_GBps"])}
    out["comm_busbw"] = comm

    # Matmul GFLOP/s, f32.
    mm = {}
    zm = {r["shape"]: r for r in rows if r.get("op") == "matmul" and r.get("impl") == "zerotrain" and r["dtype"] == "f32"}
    for shape, r in zm.items():
        e = {"zerotrain_gflops": r["gflops"]}
        for q in rows:
            if q.get("op") == "matmul" and q.get("impl") == "pytorch" and q["shape"] == shape and q["dtype"] == "f32":
                e[f"pytorch[{q.get('blas')}]_gflops"] = q["gflops"]
                e[f"zerotrain_over_pytorch[{q.get('blas')}]"] = ratio(r["gflops"], q["gflops"])
        mm[shape] = e
    # 16-bit: oneDNN's own kernel (AMX / AVX512-BF16 where present) and the f32 fallback.
    for r in rows:
        if r.get("op") == "matmul" and r.get("impl") == "zerotrain" and r["dtype"] in ("bf16", "f16"):
            e = mm.setdefault(r["shape"], {})
            e[f"zerotrain_{r['dtype']}[{r.get('path', '?')}]_gflops"] = r["gflops"]
            if r.get("path") == "onednn_lowp":
                e[f"zerotrain_{r['dtype']}_over_f32"] = ratio(r["gflops"], e.get("zerotrain_gflops"))
    out["matmul_f32"] = mm

    # Checkpoints (bench_ckpt at N = 2): GB/s per rank beside the disk's write+fsync in the same
    # run, and the streamed export's peak memory (allocator and resident) against its file size.
    ck = {r["op"]: r for r in rows if r.get("bench") == "ckpt"}
    if ck:
        disk = ck.get("disk_write_fsync", {}).get("gb_per_s_per_rank")
        out["checkpoint_per_rank"] = {
            op: {"gb_per_s_per_rank": r["gb_per_s_per_rank"], "over_disk": ratio(r["gb_per_s_per_rank"], disk)}
            for op, r in ck.items() if "gb_per_s_per_rank" in r}
    ex = [r for r in rows if r.get("bench") == "export"]
    if ex:
        out["export_memory"] = [{k: r.get(k) for k in ("dtype", "file_bytes", "largest_buffer_bytes",
                                                       "alloc_peak_bytes", "max_rss_bytes", "gb_per_s")} for r in ex]
    # Tokenizers: encode MB/s on one text beside the npm packages' JS (which is fed line by line).
    tk = [r for r in rows if r.get("bench") == "tokenizer"]
    if tk:
        out["tokenizer_mb_per_s"] = {}
        for name in sorted({r["tokenizer"] for r in tk}):
            z = next((r for r in tk if r["tokenizer"] == name and r["impl"] == "zerotrain"), None)
            j = next((r for r in tk if r["tokenizer"] == name and r["impl"] == "js"), None)
            out["tokenizer_mb_per_s"][name] = {
                "zerotrain": z and z["mb_per_s"], "zerotrain_first_pass": z and z["first_mb_per_s"],
                "js": j and j["mb_per_s"], "zerotrain_over_js": ratio(z and z["mb_per_s"], j and j["mb_per_s"])}
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
