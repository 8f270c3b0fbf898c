#!/usr/bin/env python3
"""PyTorch peers of the kernel benchmarks at the GPT benchmarks' shapes, same JSON fields as
zt_bench_matmul (MxKxN shapes), zt_bench_attention, zt_bench_kernels (layer norm, memcpy) and
zt_bench_optim (AdamW GB/s). bf16 matmuls go through torch's oneDNN (mkldnn) kernels.

Run with Debian's python (the one with torch):
  /usr/bin/python3 bench/torch_kernels.py [--threads T] [--matmul MxKxN,...] [--attention B,T,C,H;...]
      [--layer-norm ROWSxC,...] [--adam-n N]
"""
import argparse
import json
import math
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_train import blas_name  # noqa: E402


def ms_per_call(f, min_s=0.5):
    f()  # warm-up
    iters, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < min_s or iters < 3:
        f()
        iters += 1
    return 1e3 * (time.perf_counter() - t0) / iters


def emit(row, args):
    row.update({"impl": "pytorch", "threads": args.threads, "torch": torch.__version__, "blas": blas_name()})
    print(json.dumps(row), flush=True)


def matmul(m, k, n, dtype, args):
    dt = torch.float32 if dtype == "f32" else torch.bfloat16
    a, b = (torch.rand(m, k) * 2 - 1).to(dt), (torch.rand(k, n) * 2 - 1).to(dt)
    ms = ms_per_call(lambda: torch.mm(a, b))
    emit({"op": "matmul", "shape": f"{m}x{k}@{k}x{n}", "dtype": dtype,
          "path": "mkldnn" if dtype == "bf16" else "blas", "gflops": round(2.0 * m * k * n / ms / 1e6, 2)}, args)


def attention(B, T, C, H, dtype, args):
    """The oracle model's attention (unfused, T x T scores), forward + backward, from qkv [B, T, 3C]."""
    dt = torch.float32 if dtype == "f32" else torch.bfloat16
    qkv = (torch.rand(B, T, 3 * C) * 2 - 1).to(dt).requires_grad_()
    dout = (torch.rand(B, T, C) * 2 - 1).to(dt)
    D = C // H
    mask = torch.ones(T, T, dtype=torch.bool).tril()

    def fwd():
        heads = lambda t: t.reshape(B, T, H, D).transpose(1, 2)
        q, k, v = heads(qkv[..., :C]), heads(qkv[..., C:2 * C]), heads(qkv[..., 2 * C:])
        att = ((q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(D))).masked_fill(~mask, float("-inf"))
        return (F.softmax(att, dim=-1) @ v).transpose(1, 2).reshape(B, T, C)

    def step():
        qkv.grad = None
        fwd().backward(dout)

    with torch.no_grad():
        f = ms_per_call(fwd)
    fb = ms_per_call(step)
    emit({"op": "attention", "B": B, "T": T, "C": C, "H": H, "causal": True, "dtype": dtype,
          "fwd_ms": round(f, 3), "bwd_ms": round(fb - f, 3), "fwd_bwd_ms": round(fb, 3), "variant": "unfused"}, args)


def layer_norm(rows, C, dtype, args):
    dt = torch.float32 if dtype == "f32" else torch.bfloat16
    x = (torch.rand(rows, C) * 2 - 1).to(dt).requires_grad_()
    ln = torch.nn.LayerNorm(C).to(dt)
    dy = (torch.rand(rows, C) * 2 - 1).to(dt)
    with torch.no_grad():
        f = ms_per_call(lambda: ln(x))

    def step():
        x.grad = None
        ln(x).backward(dy)

    fb = ms_per_call(step)
    nbytes = rows * C * (4 if dtype == "f32" else 2)
    emit({"op": "layer_norm", "rows": rows, "C": C, "dtype": dtype, "fwd_ms": round(f, 3),
          "bwd_ms": round(fb - f, 3), "fwd_bwd_ms": round(fb, 3), "fwd_gbps": round(2 * nbytes / f / 1e6, 2),
          "bwd_gbps": round(3 * nbytes / max(fb - f, 1e-9) / 1e6, 2)}, args)


def adam(n, args):
    """torch.optim.AdamW.step on one f32 tensor of n elements; bytes as zt_bench_optim counts them."""
    p = torch.nn.Parameter(torch.full((n,), 0.5))
    p.grad = torch.full((n,), 0.01)
    opt = torch.optim.AdamW([p], lr=1e-3, weight_decay=0.01)
    ms = ms_per_call(opt.step, 1.0)
    nbytes = n * (2 * 8 + 4 + 8)  # m, v read + written; grad read; weight read + written
    emit({"bench": "optim_update", "type": "AdamW", "param": "f32", "grad": "f32", "master": False, "n": n,
          "ms": round(ms, 3), "gbps": round(nbytes / ms / 1e6, 2)}, args)


def memcpy(mib, args):
    src, dst = torch.ones(mib << 18), torch.zeros(mib << 18)
    ms = ms_per_call(lambda: dst.copy_(src))
    emit({"op": "memcpy", "bytes": mib << 20, "ms": round(ms, 4), "gbps": round(2 * (mib << 20) / ms / 1e6, 2),
          "copy_GBps": round((mib << 20) / ms / 1e6, 2)}, args)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--matmul", default="2048x192x576,2048x192x16384,1024x768x3072,1024x768x50257")
    p.add_argument("--attention", default="8,256,192,6;1,1024,768,12")
    p.add_argument("--layer-norm", default="2048x192,1024x768")
    p.add_argument("--adam-n", type=int, default=1 << 24)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(1)
    for shape in filter(None, args.matmul.split(",")):
        m, k, n = map(int, shape.split("x"))
        for dtype in ("f32", "bf16"):
            matmul(m, k, n, dtype, args)
    for shape in filter(None, args.attention.split(";")):
        B, T, C, H = map(int, shape.split(","))
        for dtype in ("f32", "bf16"):
            attention(B, T, C, H, dtype, args)
    for shape in filter(None, args.layer_norm.split(",")):
        rows, C = map(int, shape.split("x"))
        for dtype in ("f32", "bf16"):
            layer_norm(rows, C, dtype, args)
    adam(args.adam_n, args)
    for mib in (1, 16, 128):
        memcpy(mib, args)


if __name__ == "__main__":
    main()
